package envconf

// descriptions holds what each setting means, in Config's field order, for
// the README's variable table and -h (Table, Help). They live apart from
// the fields' tags because envconfig scans every tag of every field for
// keys it looks up and does not find ("ignored", "split_words",
// "required"), so the length of the tags is paid by every process at start
// (DESIGN.md §10); TestDescriptions checks that the list names Config's
// variables, in order.
var descriptions = [...]struct{ name, text string }{
	{"GASNET_SPAWNFN", "spawner: L (fork/exec on this host), S (ssh), C (custom command); empty picks S when SSH_SERVERS or SSH_NODEFILE is set, C when CSPAWN_CMD is set, C with srun inside a SLURM allocation (SLURM_JOB_ID set), else L"},
	{"GASNET_SSH_CMD", "external ssh client (ssh, rsh or a wrapper) instead of the built-in one"},
	{"GASNET_SSH_SERVERS", "hosts for the S spawner, separated by space , / ; or :"},
	{"GASNET_SSH_OPTIONS", "options for the ssh client, in OpenSSH syntax; the built-in client honours -p -l -i -F -J -q (-T -x -a -n -C change nothing) and -o HostName, Port, User, IdentityFile, IdentitiesOnly, UserKnownHostsFile, GlobalKnownHostsFile, StrictHostKeyChecking (yes, accept-new, no), HostKeyAlias, ConnectTimeout, ProxyJump, ServerAliveInterval, BatchMode, LogLevel, PasswordAuthentication, KbdInteractiveAuthentication; others need SSH_CMD=ssh"},
	{"GASNET_SSH_NODEFILE", "ours: file of hosts for the S spawner, one per line in rank order (as $PBS_NODEFILE or scontrol show hostnames), when SSH_SERVERS is unset"},
	{"GASNET_SSH_CACHE", "ours: where the S spawner stages the program on a host that lacks it or has another version (compared by size and SHA-256 over sftp), one directory per hash, reused by later jobs; relative to the remote home"},
	{"GASNET_SSH_OUT_DEGREE", "ours: spawn tree of the S spawner: the console starts this many workers over ssh and each worker starts as many more (worker i starts d·(i+1) .. d·(i+1)+d−1), so no process holds more than this many ssh connections; each host must reach its children with its own keys and ssh_config; 0 = the console starts every worker"},
	{"GASNET_SSH_REMOTE_PATH", "working directory of remote workers (default: the console's)"},
	{"GASNET_CSPAWN_CMD", "custom spawn command, run once by /bin/sh: %N count, %C worker command (quoted), %D cwd, %P program, %M servers, %% percent; default inside a SLURM allocation: srun -n %N %C"},
	{"GASNET_CSPAWN_SERVERS", "server list for %M of CSPAWN_CMD (first N, space-separated); separators space , / ; :"},
	{"GASNET_CSPAWN_ROUTE_OUTPUT", "route worker output through the console under the C spawner (else the launcher forwards it)"},
	{"GASNET_NETWORKDEPTH", "outstanding requests per peer"},
	{"GASNET_RECVDEPTH", "messages handled per poll; 0 = 2 × depth × min(max(1,N−1),4), at most 65534"},
	{"GASNET_SENDDEPTH", "outstanding requests over all peers; 0 = depth × min(max(1,N−1),4); -1 = unlimited"},
	{"GASNET_AUTH_PAYLOAD", "ours: each datagram's tag (AES-GMAC, or AEGIS-128X2's MAC from 512 bytes, keyed by the job secret) covers its payload too, so that a forged or altered payload never reaches a handler (a Long one of 16 KiB or more may first reach the segment where its genuine message lands); 0 authenticates headers, arguments and acknowledgements alone, for trusted networks (DESIGN.md §4 has the cost of each)"},
	{"GASNET_ENCRYPT", "ours: encrypt every datagram's arguments and payload with AES-128-GCM keyed by the job secret (headers stay authenticated in clear); implies GASNET_AUTH_PAYLOAD"},
	{"GASNET_SOCKETBUFFER_INITIAL", "UDP socket buffer bytes requested at start"},
	{"GASNET_SOCKETBUFFER_MAX", "UDP socket buffer bytes the buffers may grow to"},
	{"GASNET_REQUESTTIMEOUT_MAX", "µs: longest retransmission wait of the reference schedule, and its last term: a peer that sends nothing for the schedule's sum (81.1 s by default) makes its requests undeliverable; 0 = never give up. Ours: the waits themselves stop growing at 250 ms (at the first wait, if longer), so that a peer that is alive but idle is asked again at least that often under heavy loss"},
	{"GASNET_REQUESTTIMEOUT_INITIAL", "µs: first retransmission wait before an RTT estimate exists (and its upper bound). Unset, on a host with more ranks than CPUs it is at least 2 ms per rank per CPU (1.024 s for 1024 ranks on 2), at most GASNET_REQUESTTIMEOUT_MAX: a peer answers only when the scheduler runs it; GASNET_VERBOSEENV says so"},
	{"GASNET_REQUESTTIMEOUT_BACKOFF", "multiplier of each further retransmission wait while the peer is silent"},
	{"GASNET_ROUTE_OUTPUT", "route worker stdout/stderr through the console, line-buffered per worker (L and S)"},
	{"GASNET_CPU_BIND", "ours: where the L spawner's workers outnumber the CPUs the console may run on (its affinity mask) and divide evenly among them, it starts each bound to one of them (a logical CPU) in turn, from one that depends on the job, so that every CPU runs as many ranks from the start; elsewhere, and with 0, the kernel places and moves them"},
	{"GASNET_OUTPUT_LABEL", "ours: prefix each routed output line with its rank, as srun -l and mpirun --tag-output do: [R] on stdout, [R stderr] on stderr (amudprun -l)"},
	{"GASNET_OUTPUT_DIR", "ours: write each rank's routed output to files of its own in this directory (created if missing), rank.R.stdout and rank.R.stderr, instead of the console's, as mpirun --output-filename does (amudprun -output-dir DIR)"},
	{"GASNET_LINEBUFFERSZ", "bytes of a routed output line buffer; 0 = pass bytes as they come"},
	{"GASNET_MASTERIP", "address (IPv4 or IPv6) workers use to reach the console; default 127.0.0.1 for L, and under S the address of this host's interface that routes to each host"},
	{"GASNET_WORKERIP", "subnets (CIDRs, IPv4 or IPv6), addresses or address prefixes, separated by commas, in order of preference: a worker is known in the address table by its host's address on the first one an interface is on, and publishes only addresses on them; unset, by the address that reaches the console, publishing every usable address of its host (DESIGN.md §7.2)"},
	{"GASNET_FORWARD_ENV", "ours: the console's variables every worker gets, separated by spaces or commas: NAME passes the console's value, NAME=VALUE sets one (as mpirun -x; amudprun -x adds to it); remote workers get them on their env command line"},
	{"GASNET_ENV_CMD", "command that sets the environment of remote workers"},
	{"GASNET_HOST_DETECT", "how ranks are grouped by host: conduit (UDP address), hostid, hostname"},
	{"GASNET_PSHM_NETWORK_DEPTH", "datagrams of the largest size (65 KB) that each rank's shared-memory inbox holds; the inbox is the smallest power of two that does, 4 MiB at the default, whatever the number of ranks (GASNet's name; there, the depth of each queue)"},
	{"GASNET_SUPERNODE_MAXSIZE", "how many ranks of one host, at most, exchange messages through shared memory (groups of consecutive ranks of the host); 0: all of them; 1: none, every message goes by UDP. Unset, a host of more than 512 ranks per CPU uses none (0 there: all of them)"},
	{"GASNET_WORKER_RANK", "this worker's rank: an integer, or the name of a variable holding it (SLURM_PROCID, PMIX_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK)"},
	{"GASNET_VERBOSEENV", "print every setting in force and where it came from; on a host of several networks, each rank also prints the addresses it publishes (DESIGN.md §7.2)"},
	{"GASNET_STATS", "ours: each rank prints one line of its network statistics on stderr when it ends (it calls Exit or is told to exit): datagrams sent and received, retransmissions, duplicates, undeliverable requests, datagrams dropped by reason (malformed, not opening: forged, altered or misaddressed, wrong source, bad credit slot, replayed), and the messages and datagrams that went through shared memory, the datagrams that fell back to UDP from a full inbox, the wake-ups of sleeping ranks, and the Puts and Gets done by a copy between co-located segments"},
	{"GASNET_VERBOSE_ROUTES", "ours: each rank prints, on stderr, the addresses it publishes (on a host with several networks) and, when it ends, where its datagrams to each peer it routed went and whether a reply came back from there (DESIGN.md §7.2)"},
	{"GASNET_DIRECT_LAUNCH", "ours: 1 runs a program that a launcher serving PMI started as several tasks (srun --mpi=pmi2, mpiexec.hydra) as the job's ranks, without a console: rank and size from the launcher, rank 0's address found through its key-value store, the table and the job's end kept by rank 0 (DESIGN.md §9.1); 0 stops such a launch with a hint"},
	{"GASNET_RCV_THREAD", "run a background goroutine that polls the network, so handlers run and replies go out while the program computes without polling"},
	{"GASNET_CONNECT_TIMEOUT", "ours: how long the console waits for all workers to join, and a worker to reach the console; under direct launch, how long the ranks wait for every task at the launcher's first fence and for each other to reach rank 0, after which a task that never started is named"},
	{"GASNET_POLL_SPIN", "ours: busy-poll time of a blocking wait before it sleeps in the kernel; 0 = sleep at once (polite); -1ns = spin forever. Unset, it is polite on a host with more ranks than CPUs (spinners would take the CPU the ranks they wait for need), else 1ms; GASNET_VERBOSEENV says which"},
	{"GASNET_EXIT_TIMEOUT", "ours: once the job ends, a rank still computing is ended after half of it, and any worker left is killed after all of it; also how long the others have to follow a rank that ended with 0 without conduit.Exit"},
	{"GASNET_LIVENESS_TIMEOUT", "ours: a rank that does not answer the console's pings for this long (stopped with SIGSTOP, its host hung or cut off) aborts the job with a line naming it; pings go every quarter of it, and a worker that hears nothing from its console for this long (its host cut off, the console stopped) ends itself"},
	{"GASNET_PSHM_BARRIER_HIER", "as in GASNet, where the job has several shared-memory groups (GASNET_SUPERNODE_MAXSIZE; several hosts, say) and one has two ranks or more, and GASNET_BARRIER is unset, the barrier runs in two levels: the ranks of each group gather at its leader (a binomial tree, its messages through shared memory), and the leaders, one per group, in a binomial tree among themselves, so that only the leaders exchange messages between hosts; broadcasts, reductions and all-gathers run over the same two levels; 0: the one-level barrier GASNET_BARRIER describes, over messages among all the ranks, those that share memory too, and binomial trees over all ranks"},
	{"GASNET_BARRIER", "as in GASNet, the barrier's algorithm over active messages: AMDISSEM (or DISSEM: dissemination, ⌈log2 N⌉ rounds of one message per rank), AMCENTRAL (every rank tells rank 0, which releases them all), AMTREE (ours: gathered up and released down a binomial tree, each rank waking about twice); empty: AMTREE when some host has more ranks than CPUs (each of the dissemination's rounds would wake every rank there), else AMDISSEM; GASNET_VERBOSEENV says which. With GASNET_PSHM_BARRIER_HIER on, where every rank shares memory with every other (one host, say), the barrier and World's other collectives run on shared words, many times faster, set or not, as GASNet keeps its shared-memory barrier within a host: set, in its shape there (AMDISSEM by dissemination, but gathered and released on a crowded host beyond 64 ranks, where each rank would map every other's inbox; AMTREE and AMCENTRAL counted, the last rank to arrive releasing the others, or gathered and released beyond 64 ranks); across several shared-memory groups, set, they go over messages among all the ranks in one level, and unset, in two levels"},
	{"GASNET_HANG_WARN", "ours: a rank that has waited in a collective (barrier, all-gather, broadcast, reduce, all-reduce, or any collective of a team) for half of this tells the console; once some have waited this long, the console says which ranks are in which collective, and again at doubling intervals, or aborts the job when the ranks called different collectives; 0 = never"},
}

// Description returns what the setting name (a GASNET_ name) means, as the
// README's table and -h say it, or "" for a name that is not a setting.
func Description(name string) string {
	for _, d := range descriptions {
		if d.name == name {
			return d.text
		}
	}
	return ""
}
