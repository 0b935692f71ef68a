package spawn

import (
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"net/netip"
)

// Config is every setting of udpconduit, read from the environment
// (package spawn/internal/envconf holds the settings, their defaults and
// ranges, and the README's table of them).
type Config = envconf.Config

// Source says where a setting's value came from.
type Source = envconf.Source

// LoadConfig reads every setting from this process's environment and
// checks it; an error names the variable and what it accepts.
func LoadConfig() (*envconf.Config, map[string]envconf.Source, error) { return envconf.Load() }

// Help is what a program prints for -h or --help as its first argument:
// its usage (args is the syntax of its own arguments, "" for
// "[args...]"), what a job is, and the main settings.
func Help(prog, args string) string { return envconf.Help(prog, usageOf(prog, args)) }

// OnSubnets returns whether an address is on one of the entries of a
// GASNET_WORKERIP list (CIDRs, addresses or address prefixes); nil for an
// empty list.
func OnSubnets(list string) func(netip.Addr) bool { return envconf.OnSubnets(list) }
