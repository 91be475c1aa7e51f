// webrtc-load: VIEWERS WebRTC viewers of one WHEP endpoint at once, each a
// pion peer connection (pion: the WebRTC library go2rtc and mediamtx are
// built on, so no viewer shares code with the camera's stack) receiving
// H.264, with NACK, PLI and receiver reports as a browser sends them.
// Every frame is checked: rebuilt from its RTP packets (a frame with a
// packet missing is counted as broken, not as received), its NAL units
// read, its RTP time against the one before (a frame that never came
// shows as a gap at the stream's rate). At the end, one JSON object on
// standard output: each viewer's figures and the slowest one's frames/s.
//
//	webrtc-load -url http://127.0.0.1:8080/whep/h264 -viewers 10 -seconds 20 [-user U -password P] [-fps 30]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/rtp/codecs"
	"github.com/pion/webrtc/v4"
	"github.com/pion/webrtc/v4/pkg/media/samplebuilder"
)

// Viewer is one viewer's figures.
type Viewer struct {
	Frames int64 `json:"frames"`
	// Frames whose packets did not all come (samplebuilder dropped some).
	Broken int64 `json:"broken"`
	// Frames the RTP times say were sent and never came.
	Gaps   int64   `json:"gaps"`
	Keys   int64   `json:"key_frames"`
	Bytes  int64   `json:"bytes"`
	FPS    float64 `json:"fps"`
	Error  string  `json:"error,omitempty"`
	start  time.Time
	last   time.Time
	prevTS uint32
	seen   bool
}

func main() {
	target := flag.String("url", "", "the WHEP endpoint")
	viewers := flag.Int("viewers", 1, "viewers at once")
	seconds := flag.Float64("seconds", 10, "how long each receives, after its first frame")
	user := flag.String("user", "", "user for Basic authentication")
	password := flag.String("password", "", "its password")
	fps := flag.Int("fps", 30, "the stream's frame rate (to tell gaps)")
	flag.Parse()
	if *target == "" {
		flag.Usage()
		os.Exit(2)
	}
	out := make([]*Viewer, *viewers)
	var wg sync.WaitGroup
	for i := range out {
		out[i] = &Viewer{}
		wg.Add(1)
		go func(v *Viewer) {
			defer wg.Done()
			if err := watch(*target, *user, *password, time.Duration(*seconds*float64(time.Second)), uint32(90000 / *fps), v); err != nil {
				v.Error = err.Error()
			}
		}(out[i])
		// Offers one after another, as viewers arrive.
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	slowest := -1.0
	for _, v := range out {
		if v.Error == "" && (slowest < 0 || v.FPS < slowest) {
			slowest = v.FPS
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].FPS < out[b].FPS })
	json.NewEncoder(os.Stdout).Encode(map[string]any{"viewers": out, "slowest_fps": slowest})
}

func watch(target, user, password string, length time.Duration, frameTicks uint32, v *Viewer) error {
	m := &webrtc.MediaEngine{}
	feedback := []webrtc.RTCPFeedback{{Type: "nack"}, {Type: "nack", Parameter: "pli"}, {Type: "ccm", Parameter: "fir"}}
	if err := m.RegisterCodec(webrtc.RTPCodecParameters{
		RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000,
			SDPFmtpLine:  "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
			RTCPFeedback: feedback},
		PayloadType: 102,
	}, webrtc.RTPCodecTypeVideo); err != nil {
		return err
	}
	ir := &interceptor.Registry{}
	if err := webrtc.RegisterDefaultInterceptors(m, ir); err != nil {
		return err
	}
	// No mDNS: the camera offers addresses, and no query may leave for the
	// network the benchmark runs on.
	se := webrtc.SettingEngine{}
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	api := webrtc.NewAPI(webrtc.WithMediaEngine(m), webrtc.WithInterceptorRegistry(ir), webrtc.WithSettingEngine(se))
	pc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return err
	}
	defer pc.Close()
	if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo,
		webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
		return err
	}
	done := make(chan struct{})
	var once sync.Once
	pc.OnTrack(func(t *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		sb := samplebuilder.New(512, &codecs.H264Packet{}, 90000)
		for {
			p, _, err := t.ReadRTP()
			if err != nil {
				return
			}
			sb.Push(p)
			for s := sb.Pop(); s != nil; s = sb.Pop() {
				now := time.Now()
				if !v.seen {
					v.start = now
				}
				if s.PrevDroppedPackets > 0 {
					v.Broken++
				}
				if v.seen && s.PacketTimestamp-v.prevTS > frameTicks*3/2 {
					v.Gaps += int64((s.PacketTimestamp-v.prevTS+frameTicks/2)/frameTicks) - 1
				}
				v.seen, v.prevTS, v.last = true, s.PacketTimestamp, now
				slice, key := nalUnits(s.Data)
				if !slice {
					v.Broken++
					continue
				}
				if key {
					v.Keys++
				}
				v.Frames++
				v.Bytes += int64(len(s.Data))
				if now.Sub(v.start) >= length {
					once.Do(func() { close(done) })
				}
			}
		}
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		return err
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		return err
	}
	<-gathered
	// A server that limits the handshakes in flight per address answers
	// 503 meanwhile: asked again, as a player would, for up to 20 s.
	var resp *http.Response
	var answer []byte
	for try := 0; ; try++ {
		req, _ := http.NewRequest("POST", target, bytes.NewBufferString(pc.LocalDescription().SDP))
		req.Header.Set("Content-Type", "application/sdp")
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		var err error
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		answer, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || try == 100 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("WHEP %d: %s", resp.StatusCode, answer)
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: string(answer)}); err != nil {
		return err
	}
	select {
	case <-done:
	case <-time.After(length + 20*time.Second):
		return fmt.Errorf("%d frames in %v", v.Frames, length+20*time.Second)
	}
	if span := v.last.Sub(v.start).Seconds(); span > 0 {
		v.FPS = float64(v.Frames-1) / span
	}
	// The session ends as WHEP ends it.
	if loc := resp.Header.Get("Location"); loc != "" {
		base, _ := url.Parse(target)
		if ref, err := base.Parse(loc); err == nil {
			del, _ := http.NewRequest("DELETE", ref.String(), nil)
			if user != "" {
				del.SetBasicAuth(user, password)
			}
			if r, err := http.DefaultClient.Do(del); err == nil {
				r.Body.Close()
			}
		}
	}
	return nil
}

// nalUnits reads an Annex B access unit: whether it holds a coded slice,
// and whether that is an IDR picture's.
func nalUnits(au []byte) (slice, key bool) {
	for i := 0; i+3 < len(au); i++ {
		if au[i] != 0 || au[i+1] != 0 || au[i+2] != 1 {
			continue
		}
		switch au[i+3] & 0x1f {
		case 1:
			slice = true
		case 5:
			slice, key = true, true
		}
		i += 3
	}
	return slice, key
}
