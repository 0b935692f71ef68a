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
// Either form takes three more arguments, ADDR_A NETNS_B ADDR_B, to run
// between two network namespaces instead of on loopback: the first
// process's socket is bound to ADDR_A in the namespace udpfloor starts in
// (under ip netns exec), the second's to ADDR_B in the namespace named
// NETNS_B (/run/netns/NETNS_B; root).
//
// Written for udpconduit; figures, not a test.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
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

// The two sockets' addresses and, when not loopback, the second one's
// namespace (the two-namespace form).
static const char *addr_a = "127.0.0.1", *addr_b = "127.0.0.1", *netns_b;

static int sock1(struct sockaddr_in *a, const char *ip) {
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	int buf = 8 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	socklen_t l = sizeof *a;
	if (fd < 0 || inet_pton(AF_INET, ip, &a->sin_addr) != 1 || bind(fd, (struct sockaddr *)a, l) ||
	    getsockname(fd, (struct sockaddr *)a, &l)) {
		perror(ip);
		exit(1);
	}
	return fd;
}

// socks opens the two sockets: the second in namespace netns_b when set (a
// socket stays in the namespace it was made in).
static void socks(int *fa, struct sockaddr_in *a, int *fb, struct sockaddr_in *b) {
	*fa = sock1(a, addr_a);
	if (!netns_b) {
		*fb = sock1(b, addr_b);
		return;
	}
	char path[256];
	snprintf(path, sizeof path, "/run/netns/%s", netns_b);
	int self = open("/proc/self/ns/net", O_RDONLY), other = open(path, O_RDONLY);
	if (self < 0 || other < 0 || setns(other, CLONE_NEWNET)) {
		perror(path);
		exit(1);
	}
	*fb = sock1(b, addr_b);
	if (setns(self, CLONE_NEWNET)) {
		perror("setns back");
		exit(1);
	}
	close(self);
	close(other);
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
	int fa, fb;
	socks(&fa, &a, &fb, &b);
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
	int fa, fb;
	socks(&fa, &a, &fb, &b);
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
	if ((argc == 7 && !strcmp(argv[1], "pp")) || (argc == 10 && !strcmp(argv[1], "stream"))) {
		addr_a = argv[argc - 3];
		netns_b = argv[argc - 2];
		addr_b = argv[argc - 1];
		argc -= 3;
	}
	if (argc == 4 && !strcmp(argv[1], "pp"))
		return pp(atoi(argv[2]), atol(argv[3]));
	if (argc == 7 && !strcmp(argv[1], "stream")) {
		int batch = atoi(argv[6]);
		if (batch < 1 || batch > MAXBATCH)
			batch = 1;
		return stream(atoi(argv[2]), atol(argv[3]), atol(argv[4]), atol(argv[5]), batch);
	}
	fprintf(stderr, "usage: udpfloor pp SIZE ITERS | udpfloor stream SIZE COUNT WINDOW ACKEVERY BATCH; either [ADDR_A NETNS_B ADDR_B]\n");
	return 2;
}
