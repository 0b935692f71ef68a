package spawn

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// usageOf is the one-line usage of a program's console, whose own
// arguments are args ("" for "[args...]").
func usageOf(prog, args string) string {
	if args == "" {
		args = "[args...]"
	}
	return fmt.Sprintf("usage: %s N %s  (N: number of workers, a positive integer)", filepath.Base(prog), args)
}

// IsHelp reports whether arg asks for the usage: -h, -help or --help.
func IsHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// ParseN reads the node count from the console's argv[1]; its errors end
// with the program's usage, whose own arguments are args (conduit.Usage;
// "" for "[args...]").
func ParseN(argv []string, args string) (int, error) {
	if len(argv) < 2 {
		return 0, fmt.Errorf("missing N: %s", usageOf(argv[0], args))
	}
	n, err := strconv.Atoi(argv[1])
	if err != nil || n <= 0 {
		//lint:ignore ST1005 the message starts with the name of the argument, N
		return 0, fmt.Errorf("N=%q: accepted: a positive integer; %s", argv[1], usageOf(argv[0], args))
	}
	if n > 1<<20 {
		//lint:ignore ST1005 the message starts with the name of the argument, N
		return 0, fmt.Errorf("N=%d: accepted: 1..%d", n, 1<<20)
	}
	return n, nil
}
