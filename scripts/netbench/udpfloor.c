// udpfloor: the raw-UDP floors that scripts/net-bench.sh sets udpconduit's
// network path against, two processes on loopback, busy-polling
// non-blocking sockets as udpconduit's endpoints do.
//
//   udpfloor pp SIZE ITERS
//       ping-pong of SIZE-byte datagrams; prints "pp SIZE us_per_rtt".
//   udpfloor stream SIZE COUNT WINDOW ACKEVERY BATCH
//       COUNT SIZE-byte datagrams, at most WINDOW unacknowledged, the
//       receiver acknowledging every ACKEVERY; with BATCH > 1 both sides
//       use sendmmsg/recvmmsg on up to BATCH datagrams a call; prints
//       "stream SIZE BATCH us_per_msg MB_per_s".
//
// Written for udpconduit; figures, not a test.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXBATCH 64
#define MAXSIZE 65507

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int sock(struct sockaddr_in *a) {
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	int buf = 8 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t l = sizeof *a;
	if (fd < 0 || bind(fd, (struct sockaddr *)a, l) || getsockname(fd, (struct sockaddr *)a, &l)) {
		perror("socket");
		exit(1);
	}
	return fd;
}

// recv1 busy-polls fd for one datagram.
static ssize_t recv1(int fd, char *b, size_t n) {
	for (;;) {
		ssize_t r = recv(fd, b, n, MSG_DONTWAIT);
		if (r >= 0 || errno != EAGAIN)
			return r;
	}
}

// send1 sends one datagram, waiting while the socket buffer is full.
static void send1(int fd, const char *b, size_t n, struct sockaddr_in *to) {
	while (sendto(fd, b, n, MSG_DONTWAIT, (struct sockaddr *)to, sizeof *to) < 0 && (errno == EAGAIN || errno == ENOBUFS))
		;
}

static char buf[MAXBATCH][MAXSIZE];

static int pp(int size, long iters) {
	struct sockaddr_in a, b;
	int fa = sock(&a), fb = sock(&b);
	pid_t child = fork();
	if (child == 0) {
		for (;;) {
			ssize_t r = recv1(fb, buf[0], MAXSIZE);
			if (r == 1)
				_exit(0);
			send1(fb, buf[0], r, &a);
		}
	}
	for (long i = 0; i < iters / 10; i++) { // warm-up
		send1(fa, buf[1], size, &b);
		recv1(fa, buf[1], MAXSIZE);
	}
	double t = now();
	for (long i = 0; i < iters; i++) {
		send1(fa, buf[1], size, &b);
		recv1(fa, buf[1], MAXSIZE);
	}
	t = now() - t;
	send1(fa, buf[1], 1, &b);
	waitpid(child, NULL, 0);
	printf("pp %d %.3f\n", size, t / iters * 1e6);
	return 0;
}

static int stream(int size, long count, long window, long every, int batch) {
	struct sockaddr_in a, b;
	int fa = sock(&a), fb = sock(&b);
	struct mmsghdr msgs[MAXBATCH];
	struct iovec iov[MAXBATCH];
	for (int i = 0; i < MAXBATCH; i++) {
		iov[i] = (struct iovec){buf[i], MAXSIZE};
		memset(&msgs[i], 0, sizeof msgs[i]);
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	pid_t child = fork();
	if (child == 0) { // the receiver
		long got = 0;
		while (got < count) {
			int n = 1;
			if (batch > 1) {
				n = recvmmsg(fb, msgs, batch, MSG_DONTWAIT, NULL);
				if (n < 0)
					continue;
			} else if (recv(fb, buf[0], MAXSIZE, MSG_DONTWAIT) < 0)
				continue;
			for (int i = 0; i < n; i++) {
				got++;
				if (got % every == 0 || got == count)
					send1(fb, (char *)&got, sizeof got, &a);
			}
		}
		_exit(0);
	}
	for (int i = 0; i < MAXBATCH; i++) {
		iov[i].iov_len = size;
		msgs[i].msg_hdr.msg_name = &b;
		msgs[i].msg_hdr.msg_namelen = sizeof b;
	}
	long sent = 0, acked = 0;
	double t = now();
	while (acked < count) {
		while (sent < count && sent - acked < window) {
			long n = window - (sent - acked);
			if (n > count - sent)
				n = count - sent;
			if (batch > 1) {
				if (n > batch)
					n = batch;
				int r = sendmmsg(fa, msgs, n, MSG_DONTWAIT);
				if (r <= 0)
					break;
				sent += r;
			} else {
				if (sendto(fa, buf[0], size, MSG_DONTWAIT, (struct sockaddr *)&b, sizeof b) < 0)
					break;
				sent++;
			}
		}
		long ack;
		if (recv(fa, &ack, sizeof ack, MSG_DONTWAIT) == sizeof ack && ack > acked)
			acked = ack;
	}
	t = now() - t;
	waitpid(child, NULL, 0);
	printf("stream %d %d %.4f %.1f\n", size, batch, t / count * 1e6, (double)size * count / t / 1e6);
	return 0;
}

int main(int argc, char **argv) {
	if (argc == 4 && !strcmp(argv[1], "pp"))
		return pp(atoi(argv[2]), atol(argv[3]));
	if (argc == 7 && !strcmp(argv[1], "stream")) {
		int batch = atoi(argv[6]);
		if (batch < 1 || batch > MAXBATCH)
			batch = 1;
		return stream(atoi(argv[2]), atol(argv[3]), atol(argv[4]), atol(argv[5]), batch);
	}
	fprintf(stderr, "usage: udpfloor pp SIZE ITERS | udpfloor stream SIZE COUNT WINDOW ACKEVERY BATCH\n");
	return 2;
}
