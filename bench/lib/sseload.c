/*
 * sseload: bench/lib/sseload.py's SSE load client in C -- one thread, epoll, libc only.
 *
 * It opens many HTTP/1.1 streams to 127.0.0.1, decodes chunked (or plain) bodies, finds the
 * complete SSE events (ending in "\n\n") and in each `data: {"seq":N,"ts":T` line takes the
 * sequence number N and the producer's CLOCK_REALTIME timestamp T (ns). Latency = the clock
 * when the read() returned - T, into a histogram of 100 us buckets up to 60 s (negatives in
 * bucket 0, anything later in the last one). Every stream keeps a bitmap of the seqs it has
 * seen (unique and duplicate counts). Events without such a data line (comments, heartbeats,
 * checkpoints, the preamble) are ignored. bench/lib/cload.py builds and drives it.
 *
 * Usage:
 *   sseload --port P --path TEMPLATE [--count C] [--keys K | --want W] [--ready-on-headers]
 *           [--concurrency N] [--open-timeout S] [--sources N] [--poll-us U] [--streams N [--first F]]
 *
 *   --path        request path; "%d" is replaced by the stream's index, "%k" by the index
 *                 modulo --keys (the index without it), "%%" by "%"
 *   --count       the seq space: seqs 0 .. C-1 (default 1)
 *   --keys        stream n wants the seqs equal to n modulo K: n, n+K, n+2K, ... < C for n < K
 *                 (bench/compare.py's keyed scenario); streams n and n+K want the same ones
 *                 (bench/value_filters.py: many streams share a filter); without it every
 *                 stream wants --want seqs (default: all C)
 *   --ready-on-headers  a stream is open once its response head arrived (default: once its
 *                 first complete SSE event arrived)
 *   --concurrency at most N streams opening at once (default 50)
 *   --open-timeout seconds a stream may take to open (default 30)
 *   --poll-us     after a wait that returned fewer than MAX_EVENTS ready streams, sleep this many
 *                 microseconds before the next (default 0: wait at once). On loopback the server's
 *                 send() pays for waking a client asleep in epoll_wait; a client that sleeps
 *                 instead is woken by no send, as a client on another machine is not
 *   --sources     connect from N loopback addresses, stream n from 127.0.0.(1 + n % N) (default 1):
 *                 one source address has one ephemeral port range (about 28,000 ports) towards the
 *                 server's address and port, so 100,000 streams need at least 4
 *   --streams/--first  open these streams at once, as an `open F N` command would
 *
 * Protocol: the parent writes one command a line on stdin; every answer is one line on stdout.
 *   open <first> <n> [<concurrency>]
 *             open streams first .. first+n-1. Each one that cannot open (refused, not HTTP 200,
 *             closed or timed out before it was ready) prints "failed <index> <reason>"; once
 *             each is ready or failed: "opened <ready> <failed>" (of this batch). One batch at
 *             a time ("error ..." otherwise).
 *   measure | unmeasure
 *             start / stop counting disconnects (streams closed by the peer or by an error);
 *             answer "measuring 1" / "measuring 0".
 *   wait <seconds>
 *             wait until every opened stream has all the seqs it wants or is closed, or the
 *             seconds passed; answer "done <complete> <closed> <pending>" (opened streams with
 *             all they want, closed ones without, the rest).
 *   report    one JSON object on one line: events, max_ns, last_ns (CLOCK_REALTIME of the
 *             last read that had events), disconnects, reads, opened, failed, complete, closed,
 *             sum_unique, sum_duplicates, sum_want (over the opened streams), out_of_range
 *             (seqs >= count, or with --keys seqs the stream does not want), cpu_seconds (own
 *             user + system time) and hist, the non-empty buckets as [[bucket, count], ...].
 *   close     (or EOF on stdin) close every stream and exit 0.
 *
 *   gcc -O2 -Wall -Wextra -std=gnu11 -o sseload sseload.c
 */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUCKET_NS 100000LL
#define BUCKETS 600000
#define READ_SIZE (256 * 1024)
/* Room before the read area: a stream's partial event is put there, right before the new bytes. */
#define RESERVE (64 * 1024)
#define HEAD_MAX (32 * 1024)
#define CARRY_MAX (16 * 1024 * 1024)
#define MAX_EVENTS 1024
#define STDIN_TAG UINT64_MAX

enum { S_CONNECTING, S_HEAD, S_BODY, S_CLOSED };
enum { CH_SIZE, CH_EXT, CH_DATA, CH_DATA_END, CH_DONE };

struct stream {
    int fd;
    int index;
    uint32_t slot;
    uint8_t state;
    uint8_t chunk_state;
    bool chunked;
    bool ready;
    bool failed;
    bool complete;
    uint64_t chunk_left;
    int64_t deadline_ns; /* CLOCK_MONOTONIC, while opening */
    char *carry;         /* the response head or the event so far */
    uint32_t carry_len;
    uint32_t carry_cap;
    uint8_t *seen;
    uint64_t want;
    uint64_t unique;
    uint64_t duplicates;
};

/* The job. */
static int opt_port;
static const char *opt_path;
static uint64_t opt_count = 1;
static uint64_t opt_keys;
static int64_t opt_want = -1;
static bool opt_ready_on_headers;
static int opt_concurrency = 50;
static double opt_open_timeout = 30.0;
static int opt_sources = 1;
static int opt_poll_us;

/* Every stream ever opened, by slot (epoll's data is the slot). */
static struct stream **streams;
static size_t n_streams;
static size_t cap_streams;

/* The batch being opened. */
static struct {
    bool active;
    int first;
    int n;
    int next;
    int inflight;
    int ready;
    int failed;
    int concurrency;
    size_t slot0;
} batch;

/* Totals. */
static uint64_t hist[BUCKETS];
static int64_t max_ns;
static int64_t last_ns;
static uint64_t events;
static uint64_t reads;
static uint64_t disconnects;
static uint64_t out_of_range;
static bool measuring;
static uint64_t n_ready;    /* streams that opened */
static uint64_t n_failed;   /* streams that did not */
static uint64_t n_complete; /* opened streams with every seq they want */
static uint64_t n_closed;   /* opened streams closed before they had them */

static bool waiting;
static int64_t wait_deadline_ns;

static int epoll_fd;
static size_t seen_bytes;
static char *buffer; /* RESERVE + READ_SIZE + 1 */
static char *read_area;

static int64_t clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void out(const char *format, ...) __attribute__((format(printf, 1, 2)));

static void out(const char *format, ...) {
    va_list args;
    va_start(args, format);
    vfprintf(stdout, format, args);
    va_end(args);
    fputc('\n', stdout);
    if (fflush(stdout) != 0)
        exit(0); /* the parent is gone */
}

static void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "sseload: out of memory\n");
        exit(2);
    }
    return p;
}

static void carry_reserve(struct stream *s, size_t size) {
    if (size <= s->carry_cap)
        return;
    size_t cap = s->carry_cap ? s->carry_cap : 512;
    while (cap < size)
        cap *= 2;
    char *p = realloc(s->carry, cap);
    if (!p) {
        fprintf(stderr, "sseload: out of memory\n");
        exit(2);
    }
    s->carry = p;
    s->carry_cap = (uint32_t)cap;
}

static void carry_set(struct stream *s, const char *data, size_t len) {
    carry_reserve(s, len);
    memmove(s->carry, data, len);
    s->carry_len = (uint32_t)len;
}

static void stream_release(struct stream *s) {
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    s->state = S_CLOSED;
    free(s->seen);
    s->seen = NULL;
    free(s->carry);
    s->carry = NULL;
    s->carry_len = s->carry_cap = 0;
}

/* A stream that did not open: reported, and left out of every total. */
static void stream_fail(struct stream *s, const char *reason) {
    if (s->ready || s->failed)
        return;
    s->failed = true;
    n_failed++;
    batch.failed++;
    batch.inflight--;
    char clean[400];
    size_t i = 0;
    for (; reason[i] && i < sizeof clean - 1; i++)
        clean[i] = (reason[i] == '\n' || reason[i] == '\r') ? ' ' : reason[i];
    clean[i] = 0;
    out("failed %d %s", s->index, clean);
    stream_release(s);
}

static void stream_complete_check(struct stream *s) {
    if (!s->complete && s->unique >= s->want) {
        s->complete = true;
        n_complete++;
    }
}

static void stream_ready(struct stream *s) {
    s->ready = true;
    n_ready++;
    batch.ready++;
    batch.inflight--;
    stream_complete_check(s);
}

/* The connection ended: a disconnect while measuring; before it was ready, a failure. */
static void stream_lost(struct stream *s, const char *reason) {
    if (s->state == S_CLOSED)
        return;
    if (measuring)
        disconnects++;
    if (!s->ready) {
        char text[300];
        snprintf(text, sizeof text, "connection lost: %s", reason);
        stream_fail(s, text);
        return;
    }
    if (!s->complete)
        n_closed++;
    stream_release(s);
}

static void request_path(char *dst, size_t size, int index) {
    size_t n = 0;
    for (const char *p = opt_path; *p && n + 12 < size; p++) {
        if (p[0] == '%' && p[1] == 'd') {
            n += (size_t)snprintf(dst + n, size - n, "%d", index);
            p++;
        } else if (p[0] == '%' && p[1] == 'k') {
            n += (size_t)snprintf(dst + n, size - n, "%llu",
                                  (unsigned long long)(opt_keys ? (uint64_t)index % opt_keys : (uint64_t)index));
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            dst[n++] = '%';
            p++;
        } else {
            dst[n++] = *p;
        }
    }
    dst[n] = 0;
}

static bool stream_request(struct stream *s) {
    char path[2048];
    char request[2400];
    request_path(path, sizeof path, s->index);
    int len = snprintf(request, sizeof request,
                       "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: text/event-stream\r\n"
                       "Cache-Control: no-cache\r\n\r\n",
                       path, opt_port);
    /* A fresh socket takes a few hundred bytes at once; a short write is a failure here. */
    ssize_t sent = send(s->fd, request, (size_t)len, MSG_NOSIGNAL);
    if (sent != len) {
        stream_fail(s, sent < 0 ? strerror(errno) : "short write of the request");
        return false;
    }
    return true;
}

static uint64_t want_of(int index) {
    if (opt_keys) {
        uint64_t i = (uint64_t)index % opt_keys;
        return i < opt_count ? (opt_count - i + opt_keys - 1) / opt_keys : 0;
    }
    return opt_want >= 0 ? (uint64_t)opt_want : opt_count;
}

static void stream_start(int index) {
    if (n_streams == cap_streams) {
        cap_streams = cap_streams ? 2 * cap_streams : 1024;
        streams = realloc(streams, cap_streams * sizeof *streams);
        if (!streams) {
            fprintf(stderr, "sseload: out of memory\n");
            exit(2);
        }
    }
    struct stream *s = xcalloc(1, sizeof *s);
    size_t slot = n_streams++;
    streams[slot] = s;
    s->index = index;
    s->slot = (uint32_t)slot;
    s->fd = -1;
    s->state = S_CONNECTING;
    s->want = want_of(index);
    s->seen = xcalloc(seen_bytes, 1);
    s->deadline_ns = clock_ns(CLOCK_MONOTONIC) + (int64_t)(opt_open_timeout * 1e9);
    batch.inflight++;

    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        stream_fail(s, strerror(errno));
        return;
    }
    int one = 1;
    setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (opt_sources > 1) {
        /* The port is chosen at connect(), per source address (not reserved for every destination at bind()). */
        setsockopt(s->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        struct sockaddr_in source = {.sin_family = AF_INET};
        source.sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)(index % opt_sources));
        if (bind(s->fd, (struct sockaddr *)&source, sizeof source) < 0) {
            stream_fail(s, strerror(errno));
            return;
        }
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt_port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = slot};
    if (connect(s->fd, (struct sockaddr *)&addr, sizeof addr) == 0) {
        if (!stream_request(s))
            return;
        s->state = S_HEAD;
        ev.events = EPOLLIN;
    } else if (errno != EINPROGRESS) {
        stream_fail(s, strerror(errno));
        return;
    }
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, s->fd, &ev) < 0)
        stream_fail(s, strerror(errno));
}

/* Start streams of the batch up to its concurrency; "opened" once all are ready or failed. */
static void batch_pump(void) {
    if (!batch.active)
        return;
    while (batch.inflight < batch.concurrency && batch.next < batch.n)
        stream_start(batch.first + batch.next++);
    if (batch.next == batch.n && batch.inflight == 0) {
        batch.active = false;
        out("opened %d %d", batch.ready, batch.failed);
    }
}

static void batch_timeouts(void) {
    int64_t now = clock_ns(CLOCK_MONOTONIC);
    for (size_t slot = batch.slot0; slot < n_streams; slot++) {
        struct stream *s = streams[slot];
        if (!s->ready && !s->failed && now > s->deadline_ns)
            stream_fail(s, "timed out opening");
    }
}

static void batch_open(int first, int n, int concurrency) {
    if (batch.active) {
        out("error a batch is still opening");
        return;
    }
    batch.active = true;
    batch.first = first;
    batch.n = n < 0 ? 0 : n;
    batch.next = batch.inflight = batch.ready = batch.failed = 0;
    batch.concurrency = concurrency > 0 ? concurrency : 1;
    batch.slot0 = n_streams;
}

/* -- parsing ------------------------------------------------------------------------------ */

static void record(struct stream *s, uint64_t seq, int64_t ts, int64_t now) {
    int64_t latency = now - ts;
    if (latency > max_ns)
        max_ns = latency;
    int64_t bucket = latency / BUCKET_NS;
    if (bucket < 0)
        bucket = 0;
    else if (bucket >= BUCKETS)
        bucket = BUCKETS - 1;
    hist[bucket]++;
    /* With --keys, a seq of another stream's is out of range too: it counts as lost, never as received. */
    if (seq >= opt_count || (opt_keys && seq % opt_keys != (uint64_t)s->index % opt_keys)) {
        out_of_range++;
        return;
    }
    uint8_t bit = (uint8_t)(1u << (seq & 7));
    uint8_t *byte = &s->seen[seq >> 3];
    if (*byte & bit) {
        s->duplicates++;
    } else {
        *byte |= bit;
        s->unique++;
    }
}

/* The data lines of the complete events in [p, end); *end is the '\n' that ends the last line. */
static void events_parse(struct stream *s, const char *p, const char *end, int64_t now) {
    static const char prefix[] = "data: {\"seq\":";
    const size_t prefix_len = sizeof prefix - 1;
    uint64_t found = 0;
    while (p < end) {
        if (*p == 'd' && (size_t)(end - p) > prefix_len && memcmp(p, prefix, prefix_len) == 0) {
            const char *q = p + prefix_len;
            /* Digits stop at the latest at *end, a '\n'. */
            if (*q >= '0' && *q <= '9') {
                uint64_t seq = 0;
                while (*q >= '0' && *q <= '9')
                    seq = seq * 10 + (uint64_t)(*q++ - '0');
                if (end - q > 6 && memcmp(q, ",\"ts\":", 6) == 0 && q[6] >= '0' && q[6] <= '9') {
                    q += 6;
                    uint64_t ts = 0;
                    while (*q >= '0' && *q <= '9')
                        ts = ts * 10 + (uint64_t)(*q++ - '0');
                    record(s, seq, (int64_t)ts, now);
                    found++;
                }
            }
            p = q;
        }
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        p = nl + 1;
    }
    if (found) {
        events += found;
        last_ns = now;
        stream_complete_check(s);
    }
}

/* Dechunk [p, p+n) in place; the decoded length, or -1 on a malformed body. */
static ssize_t dechunk(struct stream *s, char *p, size_t n) {
    char *in = p, *end = p + n, *dst = p;
    while (in < end) {
        switch (s->chunk_state) {
        case CH_SIZE: {
            char c = *in++;
            int v;
            if (c >= '0' && c <= '9')
                v = c - '0';
            else if (c >= 'a' && c <= 'f')
                v = c - 'a' + 10;
            else if (c >= 'A' && c <= 'F')
                v = c - 'A' + 10;
            else if (c == ';') {
                s->chunk_state = CH_EXT;
                break;
            } else if (c == '\n') {
                s->chunk_state = s->chunk_left ? CH_DATA : CH_DONE;
                break;
            } else if (c == '\r' || c == ' ' || c == '\t')
                break;
            else
                return -1;
            if (s->chunk_left >> 40)
                return -1;
            s->chunk_left = s->chunk_left * 16 + (uint64_t)v;
            break;
        }
        case CH_EXT:
            if (*in++ == '\n')
                s->chunk_state = s->chunk_left ? CH_DATA : CH_DONE;
            break;
        case CH_DATA: {
            size_t take = (size_t)(end - in);
            if (take > s->chunk_left)
                take = (size_t)s->chunk_left;
            if (dst != in)
                memmove(dst, in, take);
            dst += take;
            in += take;
            s->chunk_left -= take;
            if (!s->chunk_left)
                s->chunk_state = CH_DATA_END;
            break;
        }
        case CH_DATA_END:
            if (*in++ == '\n')
                s->chunk_state = CH_SIZE;
            break;
        default: /* the last chunk: nothing more of this response */
            in = end;
            break;
        }
    }
    return dst - p;
}

/* New body bytes at p (in the read area, with room before them): complete events are parsed,
 * the rest kept for the next read. */
static void body_feed(struct stream *s, char *p, size_t n, int64_t now) {
    size_t carry = s->carry_len;
    char *text;
    size_t len = carry + n;
    bool in_carry = false;
    if (!carry) {
        text = p;
    } else if (carry <= (size_t)(p - buffer)) {
        text = p - carry;
        memcpy(text, s->carry, carry);
    } else { /* an event longer than the room before the read area */
        if (len > CARRY_MAX) {
            stream_lost(s, "an event longer than 16 MiB");
            return;
        }
        carry_reserve(s, len);
        memcpy(s->carry + carry, p, n);
        text = s->carry;
        in_carry = true;
    }
    /* The last "\n\n" whose second '\n' is new (the kept part had none). */
    const char *low = text + (carry ? carry : 1);
    const char *q = text + len;
    const char *pair = NULL;
    while (q > low) {
        q = memrchr(low, '\n', (size_t)(q - low));
        if (!q)
            break;
        if (q[-1] == '\n') {
            pair = q - 1;
            break;
        }
    }
    if (!pair) {
        if (len > CARRY_MAX) {
            stream_lost(s, "an event longer than 16 MiB");
            return;
        }
        if (in_carry)
            s->carry_len = (uint32_t)len;
        else
            carry_set(s, text, len);
        return;
    }
    if (!s->ready)
        stream_ready(s);
    events_parse(s, text, pair, now);
    size_t rest = len - (size_t)(pair + 2 - text);
    if (rest)
        carry_set(s, pair + 2, rest);
    else
        s->carry_len = 0;
}

static bool head_is_chunked(const char *head, size_t len) {
    static const char name[] = "transfer-encoding: chunked";
    const size_t name_len = sizeof name - 1;
    for (size_t i = 0; i + name_len <= len; i++)
        if ((head[i] | 0x20) == 't' && strncasecmp(head + i, name, name_len) == 0)
            return true;
    return false;
}

/* Bytes of the response body as read: de-chunked when the response is chunked, then fed. */
static void body_bytes(struct stream *s, char *data, size_t len, int64_t now) {
    if (!len)
        return;
    if (s->chunked) {
        ssize_t decoded = dechunk(s, data, len);
        if (decoded < 0) {
            stream_lost(s, "malformed chunked body");
            return;
        }
        len = (size_t)decoded;
    }
    if (len)
        body_feed(s, data, len, now);
}

static void head_feed(struct stream *s, char *p, size_t n, int64_t now) {
    size_t carry = s->carry_len;
    char *text = p - carry; /* carry <= HEAD_MAX < RESERVE */
    if (carry)
        memcpy(text, s->carry, carry);
    size_t len = carry + n;
    char *from = carry >= 3 ? text + carry - 3 : text;
    char *end = memmem(from, (size_t)(text + len - from), "\r\n\r\n", 4);
    if (!end) {
        if (len > HEAD_MAX)
            stream_lost(s, "response head longer than 32 KiB");
        else
            carry_set(s, text, len);
        return;
    }
    s->carry_len = 0;
    size_t head_len = (size_t)(end - text);
    int status = 0;
    const char *space = memchr(text, ' ', head_len);
    if (space)
        status = atoi(space + 1);
    if (status != 200) {
        char reason[360];
        int k = snprintf(reason, sizeof reason, "HTTP %d: ", status);
        for (size_t i = 0; i < head_len && i < 300 && (size_t)k < sizeof reason - 1; i++) {
            unsigned char c = (unsigned char)text[i];
            reason[k++] = (c >= 32 && c < 127) ? (char)c : ' ';
        }
        reason[k] = 0;
        stream_fail(s, reason);
        return;
    }
    s->chunked = head_is_chunked(text, head_len);
    s->state = S_BODY;
    if (opt_ready_on_headers)
        stream_ready(s);
    char *body = end + 4;
    body_bytes(s, body, (size_t)(text + len - body), now);
}

static void stream_readable(struct stream *s) {
    ssize_t n = read(s->fd, read_area, READ_SIZE);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        stream_lost(s, strerror(errno));
        return;
    }
    if (n == 0) {
        stream_lost(s, "closed by the server");
        return;
    }
    int64_t now = clock_ns(CLOCK_REALTIME);
    reads++;
    if (s->state == S_HEAD) {
        head_feed(s, read_area, (size_t)n, now);
        return;
    }
    body_bytes(s, read_area, (size_t)n, now);
}

static void stream_event(struct stream *s, uint32_t flags) {
    if (s->state == S_CLOSED)
        return;
    if (s->state == S_CONNECTING) {
        int error = 0;
        socklen_t size = sizeof error;
        if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &error, &size) < 0)
            error = errno;
        if (error) {
            stream_fail(s, strerror(error));
            return;
        }
        if (!(flags & EPOLLOUT))
            return;
        if (!stream_request(s))
            return;
        s->state = S_HEAD;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = s->slot};
        if (epoll_ctl(epoll_fd, EPOLL_CTL_MOD, s->fd, &ev) < 0)
            stream_fail(s, strerror(errno));
        return;
    }
    stream_readable(s);
}

/* -- commands ----------------------------------------------------------------------------- */

static void report(void) {
    uint64_t sum_unique = 0, sum_duplicates = 0, sum_want = 0;
    for (size_t slot = 0; slot < n_streams; slot++) {
        struct stream *s = streams[slot];
        if (!s->ready)
            continue;
        sum_unique += s->unique;
        sum_duplicates += s->duplicates;
        sum_want += s->want;
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = (double)usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + (double)usage.ru_stime.tv_sec +
                 usage.ru_stime.tv_usec / 1e6;
    printf("{\"events\":%llu,\"max_ns\":%lld,\"last_ns\":%lld,\"disconnects\":%llu,\"reads\":%llu,"
           "\"opened\":%llu,\"failed\":%llu,\"complete\":%llu,\"closed\":%llu,\"sum_unique\":%llu,"
           "\"sum_duplicates\":%llu,\"sum_want\":%llu,\"out_of_range\":%llu,\"cpu_seconds\":%.6f,\"hist\":[",
           (unsigned long long)events, (long long)max_ns, (long long)last_ns, (unsigned long long)disconnects,
           (unsigned long long)reads, (unsigned long long)n_ready, (unsigned long long)n_failed,
           (unsigned long long)n_complete, (unsigned long long)n_closed, (unsigned long long)sum_unique,
           (unsigned long long)sum_duplicates, (unsigned long long)sum_want, (unsigned long long)out_of_range, cpu);
    bool first = true;
    for (size_t i = 0; i < BUCKETS; i++) {
        if (!hist[i])
            continue;
        printf("%s[%zu,%llu]", first ? "" : ",", i, (unsigned long long)hist[i]);
        first = false;
    }
    out("]}");
}

static void wait_check(int64_t now) {
    if (!waiting || batch.active)
        return;
    bool all = n_complete + n_closed >= n_ready;
    if (all || now >= wait_deadline_ns) {
        waiting = false;
        out("done %llu %llu %llu", (unsigned long long)n_complete, (unsigned long long)n_closed,
            (unsigned long long)(n_ready - n_complete - n_closed));
    }
}

static void shutdown_exit(void) {
    for (size_t slot = 0; slot < n_streams; slot++)
        if (streams[slot]->fd >= 0)
            close(streams[slot]->fd);
    fflush(stdout);
    exit(0);
}

static void command(char *line) {
    char word[32] = "";
    if (sscanf(line, "%31s", word) != 1)
        return;
    if (!strcmp(word, "open")) {
        int first = 0, n = 0, concurrency = opt_concurrency;
        if (sscanf(line, "%*s %d %d %d", &first, &n, &concurrency) < 2) {
            out("error usage: open <first> <n> [<concurrency>]");
            return;
        }
        batch_open(first, n, concurrency);
    } else if (!strcmp(word, "measure") || !strcmp(word, "unmeasure")) {
        measuring = word[0] == 'm';
        out("measuring %d", measuring ? 1 : 0);
    } else if (!strcmp(word, "wait")) {
        double seconds = 0;
        if (sscanf(line, "%*s %lf", &seconds) != 1) {
            out("error usage: wait <seconds>");
            return;
        }
        waiting = true;
        wait_deadline_ns = clock_ns(CLOCK_MONOTONIC) + (int64_t)(seconds * 1e9);
    } else if (!strcmp(word, "report")) {
        report();
    } else if (!strcmp(word, "close")) {
        shutdown_exit();
    } else {
        out("error unknown command %s", word);
    }
}

static void stdin_readable(void) {
    static char line[4096];
    static size_t used;
    ssize_t n = read(STDIN_FILENO, line + used, sizeof line - 1 - used);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0)
        shutdown_exit();
    used += (size_t)n;
    char *start = line, *nl;
    while ((nl = memchr(start, '\n', (size_t)(line + used - start)))) {
        *nl = 0;
        command(start);
        start = nl + 1;
    }
    used = (size_t)(line + used - start);
    memmove(line, start, used);
    if (used == sizeof line - 1)
        used = 0; /* a line too long to be a command */
}

/* -- main --------------------------------------------------------------------------------- */

static void usage(void) {
    fprintf(stderr, "usage: sseload --port P --path TEMPLATE [--count C] [--keys K | --want W] "
                    "[--ready-on-headers] [--concurrency N] [--open-timeout S] [--sources N] [--poll-us U] "
                    "[--streams N [--first F]]\n");
    exit(2);
}

int main(int argc, char **argv) {
    int initial_streams = 0, initial_first = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(arg, "--ready-on-headers")) {
            opt_ready_on_headers = true;
            continue;
        }
        if (!value)
            usage();
        i++;
        if (!strcmp(arg, "--port"))
            opt_port = atoi(value);
        else if (!strcmp(arg, "--path"))
            opt_path = value;
        else if (!strcmp(arg, "--count"))
            opt_count = strtoull(value, NULL, 10);
        else if (!strcmp(arg, "--keys"))
            opt_keys = strtoull(value, NULL, 10);
        else if (!strcmp(arg, "--want"))
            opt_want = strtoll(value, NULL, 10);
        else if (!strcmp(arg, "--concurrency"))
            opt_concurrency = atoi(value);
        else if (!strcmp(arg, "--open-timeout"))
            opt_open_timeout = atof(value);
        else if (!strcmp(arg, "--poll-us"))
            opt_poll_us = atoi(value);
        else if (!strcmp(arg, "--sources"))
            opt_sources = atoi(value);
        else if (!strcmp(arg, "--streams"))
            initial_streams = atoi(value);
        else if (!strcmp(arg, "--first"))
            initial_first = atoi(value);
        else
            usage();
    }
    if (opt_port <= 0 || opt_port > 65535 || !opt_path || opt_sources < 1 || opt_sources > 254)
        usage();
    seen_bytes = (size_t)(opt_count / 8 + 1);

    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
    signal(SIGPIPE, SIG_IGN);
    static char stdout_buffer[1 << 16];
    setvbuf(stdout, stdout_buffer, _IOFBF, sizeof stdout_buffer);

    buffer = xcalloc(RESERVE + READ_SIZE + 1, 1);
    read_area = buffer + RESERVE;
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd < 0) {
        perror("epoll_create1");
        return 2;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = STDIN_TAG};
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, STDIN_FILENO, &ev) < 0) {
        perror("epoll_ctl stdin");
        return 2;
    }
    if (initial_streams > 0)
        batch_open(initial_first, initial_streams, opt_concurrency);
    batch_pump();

    static struct epoll_event ready[MAX_EVENTS];
    int64_t next_timeout_check = 0;
    for (;;) {
        int timeout = -1;
        int64_t now = clock_ns(CLOCK_MONOTONIC);
        if (batch.active)
            timeout = 100;
        if (waiting && !batch.active) {
            int64_t left = (wait_deadline_ns - now) / 1000000 + 1;
            if (left < 0)
                left = 0;
            if (timeout < 0 || left < timeout)
                timeout = (int)(left > 1000 ? 1000 : left);
        }
        int n = epoll_wait(epoll_fd, ready, MAX_EVENTS, timeout);
        if (n < 0 && errno != EINTR) {
            perror("epoll_wait");
            return 2;
        }
        for (int i = 0; i < n; i++) {
            uint64_t tag = ready[i].data.u64;
            if (tag == STDIN_TAG)
                stdin_readable();
            else
                stream_event(streams[tag], ready[i].events);
        }
        now = clock_ns(CLOCK_MONOTONIC);
        if (batch.active && now >= next_timeout_check) {
            batch_timeouts();
            next_timeout_check = now + 100000000LL;
        }
        batch_pump();
        wait_check(now);
        if (opt_poll_us > 0 && n < MAX_EVENTS)
            usleep((useconds_t)opt_poll_us);
    }
}
