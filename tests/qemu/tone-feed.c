/* tone-feed: plays into an ALSA device (the loopback card's playback
 * side, whose capture side camstream records) what camstream's test tone
 * is: 1 kHz for the first 100 ms of each second of UTC, silence between.
 * A sample is tone when the instant it will be played (now, and what is
 * queued before it) falls in a second's first 100 ms, so the recording's
 * onsets against the test pattern's clock strip are camstream's lip sync.
 *   tone-feed DEVICE   (plays until killed)
 * Test tooling for the QEMU system tests; not part of the firmware. */
#include <alsa/asoundlib.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

#define RATE 48000
#define PERIOD 480 /* 10 ms */

static void fail(const char *what, int err)
{
    fprintf(stderr, "tone-feed: %s: %s\n", what, snd_strerror(err));
    exit(1);
}

int main(int argc, char **argv)
{
    snd_pcm_t *pcm;
    int err;
    if (argc != 2) {
        fprintf(stderr, "usage: tone-feed DEVICE\n");
        return 2;
    }
    if ((err = snd_pcm_open(&pcm, argv[1], SND_PCM_STREAM_PLAYBACK, 0)) < 0) fail(argv[1], err);
    /* 50 ms queued at most: the less is queued, the less the delay
     * reported can be off. */
    if ((err = snd_pcm_set_params(pcm, SND_PCM_FORMAT_S16, SND_PCM_ACCESS_RW_INTERLEAVED, 1, RATE, 0, 50000)) < 0)
        fail("setting 48 kHz mono", err);
    short buf[PERIOD];
    unsigned long long k = 0;
    for (;;) {
        struct timespec now;
        snd_pcm_sframes_t delay = 0;
        if (snd_pcm_delay(pcm, &delay) < 0) delay = 0;
        clock_gettime(CLOCK_REALTIME, &now);
        long long at = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
        for (int i = 0; i < PERIOD; i++, k++) {
            long long t = at + (delay + i) * 1000000000LL / RATE;
            int beep = t % 1000000000LL < 100000000LL;
            buf[i] = beep ? (short)(16384 * sin(2 * M_PI * 1000.0 * (double)k / RATE)) : 0;
        }
        snd_pcm_sframes_t n = snd_pcm_writei(pcm, buf, PERIOD);
        if (n < 0 && (err = snd_pcm_recover(pcm, (int)n, 1)) < 0) fail("playing", err);
    }
}
