package conduit

import (
	"encoding/binary"
	"fmt"
)

// wordGather runs the gather c (to root) of a job that is one
// shared-memory group (w.whole) on shared words: each rank writes its part
// into its gather slot for c's number (modulo gatherSlots; its header
// last: the number, stored with release order) and, unless it is the root, returns
// at once, as an eager MPI_Gather does; the root waits until every slot
// holds the gather's number, copies the parts, and marks in each rank's
// read word for that slot which gather it read. A rank rewrites a slot
// only once the root of the gather that last wrote it has read it (a root
// that lags gatherSlots gathers behind holds its members back; it wakes
// them when it reads). A part too large for its slot (maxGatherPart) goes to the
// root as the team's messages do, and its slot says so (gatherOversize).
// The slots carry each rank's root (the root writes its header too): a
// root that finds another one in a slot reports the mismatch as any team
// collective does.
func (c *teamCall) wordGather(w *words, root int, data []byte) ([][]byte, error) {
	j, n, id := c.t.j, c.seq, c.t.id
	own, err := w.area(w.me)
	if err != nil {
		return nil, err
	}
	p := int(n % gatherSlots)
	s := own[offGatherSlots+p*gatherSlotSize : offGatherSlots+(p+1)*gatherSlotSize]
	head := word(s, 0)
	if last := head.Load(); last != 0 {
		// This rank wrote last, of this slot's residue, before n; the
		// root of gather last must have read it, unless that gather
		// failed (a mismatch: every member ended it), and reads no
		// number the slot did not hold.
		if last >= n || last%gatherSlots != uint64(p) {
			return nil, w.corrupt(w.me, "its gather slot %d is numbered %#x, before gather %d", p, last, n)
		}
		read := word(own, offGatherRead+8*p)
		err := j.wordWait(w, func() bool {
			r := read.Load()
			if r > last {
				return w.broken(w.me, "the root has read gather %#x from its gather slot %d, which holds %d", r, p, last)
			}
			return r >= last || j.teams.hasFailed(id, last)
		})
		if err != nil {
			return nil, err
		}
	}
	size := uint64(len(data))
	if len(data) > maxGatherPart {
		size = gatherOversize
	} else if w.me != root {
		copy(s[24:], data)
	}
	binary.LittleEndian.PutUint64(s[8:], size)
	binary.LittleEndian.PutUint64(s[16:], uint64(root))
	head.Store(n)
	if w.me != root {
		if err := w.sh.Notify(w.addrs[root]); err != nil {
			return nil, err
		}
		if size == gatherOversize {
			return nil, c.send(root, 0, data)
		}
		return nil, nil
	}
	// The root's part is not read from its slot, whose header tells a
	// rank that took itself for the root of this gather that it was not.
	word(own, offGatherRead+8*p).Store(n)
	// The root: every part, from its slot or by message.
	out := make([][]byte, len(w.group))
	out[root] = append([]byte{}, data...)
	slots := make([][]byte, len(w.group))
	for i := range w.group {
		if i == root {
			continue
		}
		a, err := w.area(i)
		if err != nil {
			return nil, err
		}
		slots[i] = a[offGatherSlots+p*gatherSlotSize : offGatherSlots+(p+1)*gatherSlotSize]
	}
	next := 0 // slots before next have been seen to hold gather n
	err = j.wordWait(w, func() bool {
		for ; next < len(slots); next++ {
			if next != root && word(slots[next], 0).Load() < n {
				return j.teams.hasFailed(id, n)
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if why, ok := j.teams.failure(id, n); ok {
		return nil, failedTeamCall(why)
	}
	for i, sl := range slots {
		if i == root {
			continue
		}
		m := word(sl, 0).Load()
		size := binary.LittleEndian.Uint64(sl[8:])
		theirs := binary.LittleEndian.Uint64(sl[16:])
		switch {
		case m%gatherSlots != uint64(p):
			return nil, w.corrupt(i, "its gather slot %d is numbered %#x", p, m)
		case theirs >= uint64(len(w.group)):
			return nil, w.corrupt(i, "its gather slot names root %#x, of %d ranks", theirs, len(w.group))
		case size > maxGatherPart && size != gatherOversize:
			return nil, w.corrupt(i, "its gather slot says %#x bytes, more than a slot's %d", size, maxGatherPart)
		case m != n:
			return nil, c.mismatch(fmt.Errorf("team rank %d's gather slot holds the part of collective %d", i, m))
		case theirs != uint64(root):
			return nil, c.mismatch(fmt.Errorf("team rank %d is in a gather to team rank %d, team rank %d in one to team rank %d", i, theirs, w.me, root))
		case size == gatherOversize:
			b, err := c.recv(i, 0)
			if err != nil {
				return nil, err
			}
			out[i] = b
		default:
			out[i] = append([]byte{}, sl[24:24+size]...)
		}
		a, _ := w.area(i)
		word(a, offGatherRead+8*p).Store(n)
		if err := w.sh.Notify(w.addrs[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
