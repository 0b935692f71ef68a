package sshc

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// Program is the console's program, as the staging compares it with a
// remote host's copy.
type Program struct {
	Path  string // the path the program has on hosts that have it
	Local string // the file that is copied to hosts that lack it
	Size  int64
	Hash  string // hex SHA-256 of its contents
}

// LocalProgram reads the program at p once to know its size and hash; it
// expects the same path on the hosts.
func LocalProgram(p string) (*Program, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("staging: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, fmt.Errorf("staging: reading %s: %w", p, err)
	}
	return &Program{Path: p, Local: p, Size: n, Hash: hex.EncodeToString(h.Sum(nil))}, nil
}

// DefaultCache is where staged programs go on a remote host, relative to
// the remote user's home: one directory per program hash.
const DefaultCache = ".cache/udpconduit/bin"

// stageLocks serialises the staging of one program on one host when
// several connections go to it.
var stageLocks sync.Map // key: host + hash → *sync.Mutex

// Place makes sure the program can run on the host behind c, and returns
// the path to run there: the program's own path when the host has the
// same file there (same size and SHA-256, read over sftp), else a copy in
// cache (relative paths are under the remote home) named by the hash,
// uploaded through sftp once (to a temporary name, then renamed, so that
// a half-written copy never runs and no user file is ever overwritten)
// and reused by later jobs. how says which of these it was ("present",
// "cached", "staged"), or why the path is run unchecked.
func (p *Program) Place(c *ssh.Client, host, cache string) (remote, how string, err error) {
	sc, err := sftp.NewClient(c)
	if err != nil {
		// Without sftp nothing can be compared or copied: run the path as
		// it is (a missing program then fails with the remote's message).
		return p.Path, "unchecked (the host offers no sftp subsystem: " + err.Error() + ")", nil
	}
	defer sc.Close()
	if p.sameAt(sc, p.Path) {
		return p.Path, "present", nil
	}
	if cache == "" {
		cache = DefaultCache
	}
	if !path.IsAbs(cache) {
		home, err := sc.Getwd()
		if err != nil {
			return "", "", fmt.Errorf("staging %s: the remote home: %w", p.Path, err)
		}
		cache = path.Join(home, cache)
	}
	dir := path.Join(cache, p.Hash[:32])
	remote = path.Join(dir, path.Base(p.Path))
	mu, _ := stageLocks.LoadOrStore(host+" "+p.Hash, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if p.sameAt(sc, remote) {
		return remote, "cached", nil
	}
	if err := p.upload(sc, dir, remote); err != nil {
		return "", "", fmt.Errorf("staging %s to %s: %w", p.Path, remote, err)
	}
	return remote, "staged", nil
}

// sameAt reports whether the remote file at rp is the program: a regular
// executable file of the same size and hash.
func (p *Program) sameAt(sc *sftp.Client, rp string) bool {
	fi, err := sc.Stat(rp)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != p.Size || fi.Mode().Perm()&0o100 == 0 {
		return false
	}
	f, err := sc.Open(rp)
	if err != nil {
		return false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := f.WriteTo(h); err != nil {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == p.Hash
}

// upload copies the program to remote through a temporary file in dir.
func (p *Program) upload(sc *sftp.Client, dir, remote string) error {
	if err := sc.MkdirAll(dir); err != nil {
		return err
	}
	sc.Chmod(dir, 0o700)
	var rb [8]byte
	rand.Read(rb[:])
	tmp := path.Join(dir, "."+path.Base(remote)+".tmp."+hex.EncodeToString(rb[:]))
	src, err := os.Open(p.Local)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	_, err = dst.ReadFrom(src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = sc.Chmod(tmp, 0o700)
	}
	if err == nil {
		err = sc.PosixRename(tmp, remote)
		if err != nil && strings.Contains(err.Error(), "posix-rename") {
			err = sc.Rename(tmp, remote) // a server without the extension
		}
	}
	if err != nil {
		sc.Remove(tmp)
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("%w (set GASNET_SSH_CACHE to a directory the remote user can write)", err)
		}
	}
	return err
}
