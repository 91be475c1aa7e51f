/* camstream's C API over libcamera's C++ API (source/libcamera/ffi.rs is
 * the Rust side). libcamera has no C API and its C++ API changes between
 * releases: this file is the only place that sees it, and builds against
 * libcamera 0.0.3 (Debian 12) to 0.7 (Buildroot 2026.02 and 2026.05).
 *
 * Threads: libcamera calls onComplete() on its own thread; camstream's
 * capture thread calls everything else, one call at a time per camera.
 * Errors are written into the caller's buffer as one line. */

#include <algorithm>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include <libcamera/camera.h>
#include <libcamera/camera_manager.h>
#include <libcamera/color_space.h>
#include <libcamera/control_ids.h>
#include <libcamera/controls.h>
#include <libcamera/formats.h>
#include <libcamera/framebuffer.h>
#include <libcamera/framebuffer_allocator.h>
#include <libcamera/property_ids.h>
#include <libcamera/request.h>
#include <libcamera/stream.h>
#include <libcamera/version.h>
#if LIBCAMERA_VERSION_MAJOR > 0 || LIBCAMERA_VERSION_MINOR >= 2
#include <libcamera/orientation.h>
#endif

using namespace libcamera;

namespace {

void fail(char *err, size_t len, const char *fmt, ...)
{
	if (!err || !len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

const char *typeName(ControlType t)
{
	switch (t) {
	case ControlTypeBool: return "bool";
	case ControlTypeByte: return "byte";
	case ControlTypeInteger32: return "int32";
	case ControlTypeInteger64: return "int64";
	case ControlTypeFloat: return "float";
	case ControlTypeString: return "string";
	case ControlTypeRectangle: return "rectangle";
	case ControlTypeSize: return "size";
	default: return "other";
	}
}

/* The formats camstream encodes, best first: planar 4:2:0 goes to the
 * encoder as is; NV12 needs its chroma split; packed RGB (all vimc gives)
 * is converted by libjpeg-turbo. */
const PixelFormat kFormats[] = {
	formats::YUV420, formats::NV12, formats::BGR888, formats::RGB888,
};

/* One number, or an array of them (FrameDurationLimits, ColourGains). */
template<typename T>
void setNumbers(ControlValue &value, const double *v, size_t n)
{
	if (n == 1) {
		value.set<T>(static_cast<T>(v[0]));
		return;
	}
	std::vector<T> a(v, v + n);
	value.set(Span<const T>(a.data(), a.size()));
}

std::string locationName(const ControlList &props)
{
	auto loc = props.get(properties::Location);
	if (!loc)
		return "";
	switch (*loc) {
	case properties::CameraLocationFront: return "front";
	case properties::CameraLocationBack: return "back";
	case properties::CameraLocationExternal: return "external";
	default: return "other";
	}
}

} /* namespace */

struct cs_lc_camera;

struct cs_lc_manager {
	std::unique_ptr<CameraManager> cm;
	/* Cameras lost while streaming, freed once the manager has stopped. */
	std::vector<cs_lc_camera *> lost;
};

struct cs_lc_frame {
	uint32_t index;
	uint32_t sequence;
	uint64_t timestamp_ns;
	/* Completed frames given back unseen since the last one (a newer one
	 * was ready), and frames the pipeline flagged as failed. */
	uint32_t skipped;
	uint32_t failed;
	uint32_t planes;
	const uint8_t *data[3];
	size_t length[3];
	/* The frame's buffer as a dmabuf a hardware encoder may read in
	 * place, when every plane lies in the same one (-1 otherwise): its
	 * size, each plane's offset in it, and how many buffers the camera
	 * has. */
	int32_t fd;
	uint32_t buffers;
	size_t fd_length;
	size_t offset[3];
};

struct cs_lc_pix_format {
	uint32_t width;
	uint32_t height;
	uint32_t stride;
	char format[16];
	/* Its samples span the full range (JFIF's), as the colour space the
	 * pipeline settled on says; RGB always does. */
	uint32_t full_range;
	/* The flips the camera makes (CS_LC_HFLIP, CS_LC_VFLIP), and whether
	 * it can make both. */
	uint32_t flips;
	uint32_t can_flip;
};

struct cs_lc_camera {
	cs_lc_manager *manager = nullptr;
	std::shared_ptr<Camera> camera;
	std::unique_ptr<CameraConfiguration> config;
	Stream *stream = nullptr;
	std::unique_ptr<FrameBufferAllocator> allocator;
	std::vector<std::unique_ptr<Request>> requests;
	/* Per request: each plane's address in the mappings below. */
	std::vector<std::vector<std::pair<const uint8_t *, size_t>>> planes;
	/* Per request: its buffer's dmabuf if all its planes share one
	 * (-1 otherwise), the dmabuf's size and each plane's offset. */
	struct shared {
		int fd;
		size_t length;
		std::vector<size_t> offsets;
	};
	std::vector<shared> dmabufs;
	std::vector<std::pair<void *, size_t>> maps;
	uint32_t flips = 0;
	bool canFlip = false;
	ControlList controls;
	/* Set while streaming: carried by the next request queued. */
	ControlList pending;
	bool started = false;

	std::mutex lock;
	std::condition_variable cv;
	std::vector<Request *> completed;
	bool gone = false;

	/* Frees what camstream holds; `stop` if the camera is still there. */
	void free(bool stop)
	{
		if (stop && started)
			camera->stop();
		camera->requestCompleted.disconnect(this, &cs_lc_camera::onComplete);
		camera->disconnected.disconnect(this, &cs_lc_camera::onDisconnected);
		requests.clear();
		for (auto &[addr, size] : maps)
			munmap(addr, size);
		if (allocator)
			allocator->free(stream);
		allocator.reset();
		if (stop)
			camera->release();
	}

	void onComplete(Request *request)
	{
		if (request->status() == Request::RequestCancelled)
			return;
		std::lock_guard<std::mutex> g(lock);
		completed.push_back(request);
		cv.notify_one();
	}

	void onDisconnected()
	{
		std::lock_guard<std::mutex> g(lock);
		gone = true;
		cv.notify_one();
	}

	int requeue(Request *r)
	{
		r->reuse(Request::ReuseBuffers);
		if (!pending.empty()) {
			r->controls().merge(pending);
			pending.clear();
		}
		return camera->queueRequest(r);
	}
};

namespace {

/* Flips as cs_lc_open takes them. */
constexpr uint32_t CS_LC_HFLIP = 1, CS_LC_VFLIP = 2, CS_LC_NOT_FLIPS = 4;

#if LIBCAMERA_VERSION_MAJOR > 0 || LIBCAMERA_VERSION_MINOR >= 2
/* libcamera 0.2 on: the picture's orientation, the sensor's mounting
 * already made up for; a vertical flip is a mirrored 180. */
void setFlips(CameraConfiguration &config, uint32_t flips)
{
	static const Orientation o[4] = { Orientation::Rotate0, Orientation::Rotate0Mirror,
					  Orientation::Rotate180Mirror, Orientation::Rotate180 };
	config.orientation = o[flips & 3];
}

uint32_t flipsOf(const CameraConfiguration &config)
{
	switch (config.orientation) {
	case Orientation::Rotate0: return 0;
	case Orientation::Rotate0Mirror: return CS_LC_HFLIP;
	case Orientation::Rotate180Mirror: return CS_LC_VFLIP;
	case Orientation::Rotate180: return CS_LC_HFLIP | CS_LC_VFLIP;
	default: return CS_LC_NOT_FLIPS; /* turned by 90 degrees */
	}
}
#else
/* Before 0.2: a transform of the sensor's picture. */
void setFlips(CameraConfiguration &config, uint32_t flips)
{
	Transform t = Transform::Identity;
	if (flips & CS_LC_HFLIP)
		t = t | Transform::HFlip;
	if (flips & CS_LC_VFLIP)
		t = t | Transform::VFlip;
	config.transform = t;
}

uint32_t flipsOf(const CameraConfiguration &config)
{
	int t = static_cast<int>(config.transform);
	if (t & static_cast<int>(Transform::Transpose))
		return CS_LC_NOT_FLIPS;
	return (t & static_cast<int>(Transform::HFlip) ? CS_LC_HFLIP : 0) |
	       (t & static_cast<int>(Transform::VFlip) ? CS_LC_VFLIP : 0);
}
#endif

} /* namespace */

extern "C" {

/* libcamera logs to stderr at INFO: camstream's log wants its warnings
 * only, without colour, unless the user asked otherwise. Called before any
 * thread starts (setenv is not thread-safe). */
void cs_lc_init(void)
{
	setenv("LIBCAMERA_LOG_LEVELS", "*:WARN", 0);
	setenv("LIBCAMERA_LOG_NO_COLOR", "1", 0);
}

const char *cs_lc_version(void)
{
	static const std::string v = CameraManager::version();
	return v.c_str();
}

cs_lc_manager *cs_lc_manager_start(char *err, size_t len)
{
	auto m = std::make_unique<cs_lc_manager>();
	m->cm = std::make_unique<CameraManager>();
	int ret = m->cm->start();
	if (ret) {
		fail(err, len, "libcamera: cannot start its camera manager: %s", strerror(-ret));
		return nullptr;
	}
	return m.release();
}

void cs_lc_manager_stop(cs_lc_manager *m)
{
	if (!m)
		return;
	m->cm->stop();
	for (cs_lc_camera *c : m->lost) {
		c->free(false);
		delete c;
	}
	delete m;
}

/* Every camera, as lines of tab-separated fields (parsed by ffi.rs):
 *   camera ID / model NAME / location front|back|external / array WxH
 *   mode FORMAT WxH              (sensor modes: the raw stream's sizes)
 *   output FORMAT MINxMIN MAXxMAX (processed formats camstream can take)
 *   control NAME ID TYPE MIN MAX DEFAULT
 * Returns the length of the whole text; writes at most len - 1 bytes and a
 * NUL, so a caller whose buffer was short asks again. */
size_t cs_lc_describe(cs_lc_manager *m, char *buf, size_t len)
{
	std::ostringstream s;
	for (const std::shared_ptr<Camera> &cam : m->cm->cameras()) {
		const ControlList &props = cam->properties();
		s << "camera\t" << cam->id() << "\n";
		auto model = props.get(properties::Model);
		if (model)
			s << "model\t" << std::string(*model) << "\n";
		s << "location\t" << locationName(props) << "\n";
		auto array = props.get(properties::PixelArraySize);
		if (array)
			s << "array\t" << array->toString() << "\n";
		std::unique_ptr<CameraConfiguration> raw =
			cam->generateConfiguration({ StreamRole::Raw });
		if (raw && raw->size() == 1) {
			const StreamFormats &f = raw->at(0).formats();
			for (const PixelFormat &pf : f.pixelformats())
				for (const Size &sz : f.sizes(pf))
					s << "mode\t" << pf.toString() << "\t" << sz.toString() << "\n";
		}
		std::unique_ptr<CameraConfiguration> video =
			cam->generateConfiguration({ StreamRole::VideoRecording });
		if (video && video->size() == 1) {
			const StreamFormats &f = video->at(0).formats();
			for (const PixelFormat &pf : f.pixelformats()) {
				if (std::find(std::begin(kFormats), std::end(kFormats), pf) == std::end(kFormats))
					continue;
				SizeRange r = f.range(pf);
				std::vector<Size> sizes = f.sizes(pf);
				Size lo = r.min, hi = r.max;
				if (!sizes.empty()) {
					lo = sizes.front();
					hi = sizes.back();
				}
				s << "output\t" << pf.toString() << "\t" << lo.toString()
				  << "\t" << hi.toString() << "\n";
			}
		}
		/* By name: the map is unordered. */
		std::map<std::string, std::string> ctrls;
		for (const auto &[id, info] : cam->controls()) {
			std::ostringstream c;
			c << id->name() << "\t" << id->id() << "\t" << typeName(id->type())
			  << "\t" << info.min().toString() << "\t" << info.max().toString()
			  << "\t" << info.def().toString();
			ctrls[id->name()] = c.str();
		}
		for (const auto &[name, line] : ctrls)
			s << "control\t" << line << "\n";
	}
	const std::string out = s.str();
	if (len) {
		size_t n = std::min(out.size(), len - 1);
		memcpy(buf, out.data(), n);
		buf[n] = '\0';
	}
	return out.size();
}

/* Acquires camera `id` and configures one processed stream of about
 * width x height in the best format camstream takes, flipped as `flips`
 * asks where the camera can (cs_lc_pix_format says what it does). */
cs_lc_camera *cs_lc_open(cs_lc_manager *m, const char *id, uint32_t width, uint32_t height,
			 uint32_t buffers, uint32_t flips, char *err, size_t len)
{
	std::shared_ptr<Camera> cam = m->cm->get(id);
	if (!cam) {
		fail(err, len, "no libcamera camera %s", id);
		return nullptr;
	}
	int ret = cam->acquire();
	if (ret) {
		fail(err, len, "%s: cannot acquire it (%s): another program is using it",
		     id, strerror(-ret));
		return nullptr;
	}
	auto c = std::make_unique<cs_lc_camera>();
	c->manager = m;
	c->camera = cam;
	for (const PixelFormat &pf : kFormats) {
		std::unique_ptr<CameraConfiguration> config =
			cam->generateConfiguration({ StreamRole::VideoRecording });
		if (!config || config->size() != 1)
			break;
		StreamConfiguration &sc = config->at(0);
		sc.pixelFormat = pf;
		sc.size = Size(width, height);
		if (buffers)
			sc.bufferCount = buffers;
		/* JPEG's colour space (full range): the Pi's ISP makes it;
		 * a pipeline that cannot says what it makes instead. */
		sc.colorSpace = ColorSpace::Sycc;
		setFlips(*config, flips);
		if (config->validate() == CameraConfiguration::Invalid)
			continue;
		if (sc.pixelFormat != pf)
			continue;
		c->config = std::move(config);
		break;
	}
	if (c->config) {
		c->flips = flipsOf(*c->config);
		/* Whether it can flip both ways: a configuration asking for both
		 * keeps them through validation. */
		std::unique_ptr<CameraConfiguration> probe =
			cam->generateConfiguration({ StreamRole::VideoRecording });
		if (probe && probe->size() == 1) {
			probe->at(0).pixelFormat = c->config->at(0).pixelFormat;
			probe->at(0).size = c->config->at(0).size;
			setFlips(*probe, CS_LC_HFLIP | CS_LC_VFLIP);
			c->canFlip = probe->validate() != CameraConfiguration::Invalid &&
				     flipsOf(*probe) == (CS_LC_HFLIP | CS_LC_VFLIP);
		}
	}
	if (!c->config) {
		cam->release();
		fail(err, len, "%s: offers none of YUV420, NV12, BGR888, RGB888 for a video stream", id);
		return nullptr;
	}
	ret = cam->configure(c->config.get());
	if (ret) {
		cam->release();
		fail(err, len, "%s: configuring %s failed: %s", id,
		     c->config->at(0).toString().c_str(), strerror(-ret));
		return nullptr;
	}
	c->stream = c->config->at(0).stream();
	c->controls = ControlList(cam->controls());
	c->pending = ControlList(cam->controls());
	return c.release();
}

void cs_lc_pix_format(const cs_lc_camera *c, cs_lc_pix_format *info)
{
	const StreamConfiguration &sc = c->config->at(0);
	info->width = sc.size.width;
	info->height = sc.size.height;
	info->stride = sc.stride;
	snprintf(info->format, sizeof(info->format), "%s", sc.pixelFormat.toString().c_str());
	bool rgb = sc.pixelFormat == formats::BGR888 || sc.pixelFormat == formats::RGB888;
	info->full_range = rgb || (sc.colorSpace && sc.colorSpace->range == ColorSpace::Range::Full);
	info->flips = c->flips;
	info->can_flip = c->canFlip;
}

/* Sets control `id` (as cs_lc_describe lists it) when streaming starts,
 * or, once it has, from the next request queued (the thread that queues
 * them calls this). Numbers come as doubles (exact for every integer a
 * control takes). */
int cs_lc_control(cs_lc_camera *c, uint32_t id, const double *v, size_t n, char *err, size_t len)
{
	const ControlInfoMap &infos = c->camera->controls();
	auto it = infos.find(id);
	if (it == infos.end()) {
		fail(err, len, "the camera has no control %u", id);
		return -1;
	}
	const ControlId *cid = it->first;
	ControlValue value;
	switch (cid->type()) {
	case ControlTypeBool:
		if (n != 1)
			goto count;
		value.set<bool>(v[0] != 0);
		break;
	case ControlTypeInteger32:
		setNumbers<int32_t>(value, v, n);
		break;
	case ControlTypeInteger64:
		setNumbers<int64_t>(value, v, n);
		break;
	case ControlTypeFloat:
		setNumbers<float>(value, v, n);
		break;
	case ControlTypeRectangle:
		if (n != 4)
			goto count;
		value.set<Rectangle>(Rectangle(static_cast<int>(v[0]), static_cast<int>(v[1]),
					       static_cast<unsigned int>(v[2]),
					       static_cast<unsigned int>(v[3])));
		break;
	default:
		fail(err, len, "%s is a %s control, which camstream cannot set",
		     cid->name().c_str(), typeName(cid->type()));
		return -1;
	}
	c->controls.set(id, value);
	if (c->started)
		c->pending.set(id, value);
	return 0;
count:
	fail(err, len, "%s takes one value, not %zu", cid->name().c_str(), n);
	return -1;
}

/* Allocates and maps the buffers once, starts the camera with the controls
 * set, and queues every buffer. */
int cs_lc_start(cs_lc_camera *c, char *err, size_t len)
{
	const char *id = c->camera->id().c_str();
	c->allocator = std::make_unique<FrameBufferAllocator>(c->camera);
	int ret = c->allocator->allocate(c->stream);
	if (ret < 0) {
		fail(err, len, "%s: allocating buffers: %s", id, strerror(-ret));
		return -1;
	}
	/* One mapping per dmabuf, however many planes share it. */
	std::map<int, std::pair<void *, size_t>> byFd;
	for (const std::unique_ptr<FrameBuffer> &fb : c->allocator->buffers(c->stream)) {
		std::vector<std::pair<const uint8_t *, size_t>> planes;
		cs_lc_camera::shared dmabuf{fb->planes().empty() ? -1 : fb->planes()[0].fd.get(), 0, {}};
		for (const FrameBuffer::Plane &p : fb->planes()) {
			int fd = p.fd.get();
			if (fd != dmabuf.fd)
				dmabuf.fd = -1;
			dmabuf.offsets.push_back(p.offset);
			auto found = byFd.find(fd);
			if (found == byFd.end()) {
				off_t size = lseek(fd, 0, SEEK_END);
				if (size <= 0) {
					fail(err, len, "%s: a buffer has no size", id);
					return -1;
				}
				void *addr = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
				if (addr == MAP_FAILED) {
					fail(err, len, "%s: mapping a buffer: %s", id, strerror(errno));
					return -1;
				}
				c->maps.emplace_back(addr, size);
				found = byFd.emplace(fd, std::make_pair(addr, static_cast<size_t>(size))).first;
			}
			if (static_cast<size_t>(p.offset) + p.length > found->second.second) {
				fail(err, len, "%s: a plane lies outside its buffer", id);
				return -1;
			}
			planes.emplace_back(static_cast<const uint8_t *>(found->second.first) + p.offset,
					    p.length);
			dmabuf.length = found->second.second;
		}
		std::unique_ptr<Request> r = c->camera->createRequest(c->requests.size());
		if (!r || r->addBuffer(c->stream, fb.get()) < 0) {
			fail(err, len, "%s: cannot make a capture request", id);
			return -1;
		}
		c->requests.push_back(std::move(r));
		c->planes.push_back(std::move(planes));
		c->dmabufs.push_back(std::move(dmabuf));
	}
	c->camera->requestCompleted.connect(c, &cs_lc_camera::onComplete);
	c->camera->disconnected.connect(c, &cs_lc_camera::onDisconnected);
	ret = c->camera->start(&c->controls);
	if (ret) {
		fail(err, len, "%s: starting it: %s", id, strerror(-ret));
		return -1;
	}
	c->started = true;
	/* Some pipelines (vimc) apply controls from requests only: the first
	 * request carries them too. */
	if (!c->requests.empty())
		c->requests.front()->controls().merge(c->controls);
	for (std::unique_ptr<Request> &r : c->requests) {
		ret = c->camera->queueRequest(r.get());
		if (ret) {
			fail(err, len, "%s: queueing a request: %s", id, strerror(-ret));
			return -1;
		}
	}
	return 0;
}

/* Waits up to timeout_ms for a frame: 1 and *f filled (give it back with
 * cs_lc_requeue), 0 if none came, -1 if the camera is gone or failed. Only
 * the newest completed frame is handed out; older ones go straight back. */
int cs_lc_wait(cs_lc_camera *c, int timeout_ms, cs_lc_frame *f)
{
	std::vector<Request *> take;
	uint32_t failed = 0;
	{
		std::unique_lock<std::mutex> g(c->lock);
		c->cv.wait_for(g, std::chrono::milliseconds(timeout_ms),
			       [c] { return c->gone || !c->completed.empty(); });
		if (c->gone)
			return -1;
		take.swap(c->completed);
	}
	Request *newest = nullptr;
	f->skipped = 0;
	for (Request *r : take) {
		const FrameBuffer *fb = r->findBuffer(c->stream);
		bool ok = r->status() == Request::RequestComplete && fb &&
			  fb->metadata().status == FrameMetadata::FrameSuccess;
		if (!ok) {
			failed++;
			if (c->requeue(r) < 0)
				return -1;
			continue;
		}
		/* A newer one is here: the older goes back unseen. */
		if (newest) {
			f->skipped++;
			if (c->requeue(newest) < 0)
				return -1;
		}
		newest = r;
	}
	f->failed = failed;
	if (!newest)
		return 0;
	const FrameBuffer *fb = newest->findBuffer(c->stream);
	const FrameMetadata &md = fb->metadata();
	uint32_t index = static_cast<uint32_t>(newest->cookie());
	f->index = index;
	f->sequence = md.sequence;
	f->timestamp_ns = md.timestamp;
	const auto &planes = c->planes[index];
	f->planes = static_cast<uint32_t>(std::min<size_t>(planes.size(), 3));
	for (uint32_t i = 0; i < f->planes; i++) {
		f->data[i] = planes[i].first;
		/* What the pipeline wrote, if it says. */
		size_t used = i < md.planes().size() ? md.planes()[i].bytesused : 0;
		f->length[i] = used && used <= planes[i].second ? used : planes[i].second;
	}
	const cs_lc_camera::shared &dmabuf = c->dmabufs[index];
	f->fd = dmabuf.fd;
	f->buffers = static_cast<uint32_t>(c->requests.size());
	f->fd_length = dmabuf.length;
	for (uint32_t i = 0; i < f->planes; i++)
		f->offset[i] = dmabuf.offsets[i];
	return 1;
}

int cs_lc_requeue(cs_lc_camera *c, uint32_t index)
{
	if (index >= c->requests.size())
		return -1;
	return c->requeue(c->requests[index].get()) < 0 ? -1 : 0;
}

/* Stops and releases the camera; a camera `lost` while streaming is left
 * as it is until its manager stops: libcamera (0.0.3 at least) aborts when
 * asked to stop a camera whose device has gone with requests queued. */
void cs_lc_close(cs_lc_camera *c, int lost)
{
	if (!c)
		return;
	if (lost && c->started) {
		c->manager->lost.push_back(c);
		return;
	}
	c->free(true);
	delete c;
}

} /* extern "C" */
