package wire

// Kind is the message kind carried in the header.
type Kind uint8

// Message kinds. Requests and replies come in the three categories of
// active messages; AutoReply (ack.go) and Returned (returned.go) are system
// replies that run no user handler (DESIGN.md §3, §4).
const (
	KindShortRequest  Kind = 1
	KindMediumRequest Kind = 2
	KindLongRequest   Kind = 3
	KindShortReply    Kind = 4
	KindMediumReply   Kind = 5
	KindLongReply     Kind = 6
	// KindAutoReply acknowledges requests whose handler did not reply; see
	// ack.go.
	KindAutoReply Kind = 7
	// KindReturned refuses a request; Args[0] is the Reason.
	KindReturned Kind = 8
	kindLast          = KindReturned
)

var kindNames = [...]string{"invalid", "short-request", "medium-request", "long-request",
	"short-reply", "medium-reply", "long-reply", "auto-reply", "returned"}

// String returns the kind's name.
func (k Kind) String() string {
	if k > kindLast {
		return "invalid"
	}
	return kindNames[k]
}

// IsRequest reports whether k is a request kind.
func (k Kind) IsRequest() bool { return k >= KindShortRequest && k <= KindLongRequest }

// Category is the AM category of a kind: Short, Medium or Long.
type Category uint8

// The three categories of active messages.
const (
	Short Category = iota
	Medium
	Long
)

// String returns the category's name.
func (c Category) String() string {
	switch c {
	case Short:
		return "short"
	case Medium:
		return "medium"
	case Long:
		return "long"
	}
	return "invalid"
}

// Category returns the category of a request or user reply kind; system
// kinds are Short.
func (k Kind) Category() Category {
	switch k {
	case KindMediumRequest, KindMediumReply:
		return Medium
	case KindLongRequest, KindLongReply:
		return Long
	}
	return Short
}

// RequestKind returns the request kind of category c.
func RequestKind(c Category) Kind { return KindShortRequest + Kind(c) }

// ReplyKind returns the reply kind of category c.
func ReplyKind(c Category) Kind { return KindShortReply + Kind(c) }
