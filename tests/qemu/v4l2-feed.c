/* v4l2-feed: plays JPEG files into the output side of a v4l2loopback
 * device, so that its capture side acts as an MJPEG camera.
 *   v4l2-feed DEVICE FPS FILE...   (loops over the files until killed)
 * Test tooling for the QEMU system tests; not part of the firmware. */
#include <errno.h>
#include <fcntl.h>
#include <linux/videodev2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static unsigned jpeg_size(const unsigned char *p, size_t n, unsigned *w, unsigned *h)
{
    for (size_t i = 2; i + 8 < n;) {
        if (p[i] != 0xff) return 0;
        unsigned m = p[i + 1], len = p[i + 2] << 8 | p[i + 3];
        if (m == 0xc0 || m == 0xc1 || m == 0xc2) {
            *h = p[i + 5] << 8 | p[i + 6];
            *w = p[i + 7] << 8 | p[i + 8];
            return 1;
        }
        i += 2 + len;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: v4l2-feed DEVICE FPS FILE...\n");
        return 2;
    }
    int nfiles = argc - 3;
    unsigned char **data = calloc(nfiles, sizeof *data);
    size_t *size = calloc(nfiles, sizeof *size), biggest = 0;
    unsigned w = 0, h = 0;
    for (int i = 0; i < nfiles; i++) {
        FILE *f = fopen(argv[3 + i], "rb");
        struct stat st;
        if (!f || fstat(fileno(f), &st)) { perror(argv[3 + i]); return 1; }
        data[i] = malloc(st.st_size);
        size[i] = fread(data[i], 1, st.st_size, f);
        fclose(f);
        if (size[i] > biggest) biggest = size[i];
        if (i == 0 && !jpeg_size(data[i], size[i], &w, &h)) {
            fprintf(stderr, "%s: no SOF\n", argv[3]);
            return 1;
        }
    }
    int fd = open(argv[1], O_RDWR);
    if (fd < 0) { perror(argv[1]); return 1; }
    struct v4l2_format fmt = { .type = V4L2_BUF_TYPE_VIDEO_OUTPUT };
    fmt.fmt.pix.width = w;
    fmt.fmt.pix.height = h;
    fmt.fmt.pix.pixelformat = V4L2_PIX_FMT_MJPEG;
    fmt.fmt.pix.field = V4L2_FIELD_NONE;
    fmt.fmt.pix.sizeimage = (biggest + 4095) & ~4095u;
    if (ioctl(fd, VIDIOC_S_FMT, &fmt)) { perror("VIDIOC_S_FMT"); return 1; }
    struct v4l2_streamparm parm = { .type = V4L2_BUF_TYPE_VIDEO_OUTPUT };
    parm.parm.output.timeperframe.numerator = 1;
    parm.parm.output.timeperframe.denominator = atoi(argv[2]);
    ioctl(fd, VIDIOC_S_PARM, &parm);
    fprintf(stderr, "v4l2-feed: %ux%u MJPEG, %d file(s)\n", w, h, nfiles);
    long period_ns = 1000000000L / atoi(argv[2]);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (unsigned long n = 0;; n++) {
        int i = n % nfiles;
        /* One write() is one frame. */
        if (write(fd, data[i], size[i]) < 0 && errno != EAGAIN) {
            perror("write");
            return 1;
        }
        next.tv_nsec += period_ns;
        while (next.tv_nsec >= 1000000000L) { next.tv_nsec -= 1000000000L; next.tv_sec++; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
}
