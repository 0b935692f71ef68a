//go:build !linux

package amudp

import (
	"errors"

	"github.com/udpconduit/udpconduit/amudp/internal/shmring"
)

var errNoMemfd = errors.New("shared-memory inbox: this system has no memfd; ranks use UDP")

type shmInbox struct {
	path string
	ring *shmring.Ring
}

func newShmInbox(int) (*shmInbox, error)       { return nil, errNoMemfd }
func (in *shmInbox) close()                    {}
func (in *shmInbox) release()                  {}
func mapShmPeer(string) (*shmring.Ring, error) { return nil, errNoMemfd }
