package ctl

// Environment variables of the worker marker (DESIGN.md §7). They reach
// workers through the environment, never the command line.
const (
	EnvMaster = "GASNET_SPAWN_MASTER" // console address host:port
	EnvSecret = "GASNET_SPAWN_SECRET" // job secret, hex
	EnvIndex  = "GASNET_SPAWN_INDEX"  // spawn index, when the spawner knows it
	// EnvSecretFD=0, instead of EnvSecret, says that the secret is the
	// first line of the worker's stdin, its ssh session (S).
	EnvSecretFD = "GASNET_SPAWN_SECRET_FD"
	// EnvConnFD, instead of EnvSecretFD, names the file descriptor of
	// the worker's control connection, a socket the L spawner made (see
	// launch.Spec.Control): its first frame, from the console, is a Hello
	// carrying the job secret, and the worker connects to nothing.
	EnvConnFD = "GASNET_SPAWN_CONN_FD"
	// EnvForkServer makes a process of the program the L spawner's fork
	// server (launch's forkserver_linux.go), which starts this many
	// workers, instead of running the program: its socket to the console
	// is descriptor 3.
	EnvForkServer = "GASNET_SPAWN_FORKSERVER"
	// EnvProcs says that the L spawner set GOMAXPROCS=1 for this worker
	// (see launch.Local); the worker removes both from its environment.
	EnvProcs = "GASNET_SPAWN_PROCS"
	// EnvTunables says that the L spawner set GLIBC_TUNABLES for this
	// worker (see launch.Local); the worker removes both from its
	// environment.
	EnvTunables = "GASNET_SPAWN_TUNABLES"
	// EnvNoInbox says that the L spawner started this worker on a host
	// too crowded for shared memory by default (ShmCrowded): it makes no
	// inbox unless GASNET_SUPERNODE_MAXSIZE is set.
	EnvNoInbox = "GASNET_SPAWN_NOINBOX"
	// EnvBind gives the L spawner's fork server the CPUs to bind its
	// workers to, one each in turn (launch's bindOrder): a comma-separated
	// list of CPU numbers.
	EnvBind = "GASNET_SPAWN_BIND"
)

// MarkerVars are the GASNET_ variables udpconduit reads besides its
// settings: the worker markers the console sets for its workers.
var MarkerVars = []string{EnvMaster, EnvSecret, EnvIndex, EnvSecretFD, EnvConnFD, EnvForkServer, EnvProcs, EnvTunables, EnvNoInbox, EnvBind, EnvRoute, EnvTree}

// EnvRoute in a worker's environment asks it to route its stdout and stderr
// to the console over TCP (DESIGN.md §8).
const EnvRoute = "GASNET_SPAWN_ROUTE"

// EnvTree marks a worker of a spawn tree: the second line of its stdin is
// its launch.TreeInfo, and it starts its children (see
// launch.StartSubtree).
const EnvTree = "GASNET_SPAWN_TREE"
