//go:build udpconduit_nossh

package launch

import (
	"fmt"

	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
)

// This file stands in for the S spawner (ssh.go, sshext.go, tree_ssh.go) in
// a program built with -tags udpconduit_nossh. Such a program does not link
// golang.org/x/crypto/ssh, github.com/pkg/sftp and
// github.com/kevinburke/ssh_config, whose initialisation every worker
// would otherwise pay for at start (DESIGN.md §9); it starts workers with
// L and C only.

// noSSH says why there is no S spawner.
const noSSH = "this program was built with -tags udpconduit_nossh, without the ssh spawner"

// NewSSH refuses a job that chose the S spawner.
func NewSSH(cfg *envconf.Config, src map[string]envconf.Source, _ int, _ func(string, ...any)) (Spawner, error) {
	chose := envconf.DisplayName(src, "GASNET_SPAWNFN") + "=S"
	switch {
	case cfg.SpawnFn != "":
	case cfg.SSHServers != "":
		chose = envconf.DisplayName(src, "GASNET_SSH_SERVERS") + " (which chooses S)"
	case cfg.SSHNodeFile != "":
		chose = envconf.DisplayName(src, "GASNET_SSH_NODEFILE") + " (which chooses S)"
	}
	return nil, fmt.Errorf("%s: %s; accepted here: GASNET_SPAWNFN=L or C", chose, noSSH)
}

// StartSubtree refuses to start children over ssh (a spawn tree of a
// console built with the S spawner, running this build on a host).
func StartSubtree(_ *envconf.Config, _ *TreeInfo, _ []byte, _ func(int)) (*Subtree, error) {
	return nil, fmt.Errorf("spawn tree (GASNET_SSH_OUT_DEGREE): %s", noSSH)
}
