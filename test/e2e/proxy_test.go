//go:build e2e

package e2e

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// faultProxy forwards TCP connections from the replicas to PostgreSQL. It is
// transparent until told otherwise: SetLatency delays every chunk in both
// directions, Cut resets every live connection at once, the way a failing
// network or a restarted middlebox does, and Blackhole makes the database
// unreachable without refusing anything, as a partition does: connections
// are accepted and never answered.
type faultProxy struct {
	ln     net.Listener
	target string

	latency atomic.Int64 // nanoseconds added before each chunk is passed on
	swallow atomic.Bool  // drop what the server sends, until the next Cut
	// hold, when set, sees every chunk a client sends; a chunk it returns
	// true for is not passed on, and the client waits on, as behind a wire
	// that went dead mid-message. See HoldWhen.
	hold    atomic.Pointer[func([]byte) bool]
	cuts    atomic.Int64 // connections reset by Cut
	accepts atomic.Int64

	mu    sync.Mutex
	conns map[*proxyConn]struct{}
	done  bool
	// hole is closed when a blackhole ends; nil while there is none.
	hole chan struct{}
}

type proxyConn struct{ client, server net.Conn }

// newFaultProxy listens on a free loopback port and forwards to target.
func newFaultProxy(target string) (*faultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &faultProxy{ln: ln, target: target, conns: map[*proxyConn]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is the host:port the replicas connect to.
func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// SetLatency sets the delay added to every chunk, each way; 0 for none.
func (p *faultProxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// Swallow makes the proxy drop everything the server sends to the
// replicas, until the next Cut: a statement sent now runs, and commits, but
// its reply is lost, as in a network that fails right after the commit.
func (p *faultProxy) Swallow() { p.swallow.Store(true) }

// HoldWhen makes the proxy keep from the server every chunk a client sends
// for which match returns true; nil passes everything on again.
func (p *faultProxy) HoldWhen(match func(chunk []byte) bool) {
	if match == nil {
		p.hold.Store(nil)
		return
	}
	p.hold.Store(&match)
}

// Blackhole stops the proxy from passing anything on, either way, until
// Heal: a new connection is accepted and never reaches PostgreSQL, and
// what the replicas or PostgreSQL send on a live one is held, unanswered.
// Nothing is refused or reset, so nothing but a replica's own deadlines
// ends its wait. It returns how many connections were live.
func (p *faultProxy) Blackhole() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hole == nil {
		p.hole = make(chan struct{})
	}
	return len(p.conns)
}

// Heal ends a blackhole: what was held is passed on, as a healed
// partition delivers what TCP retransmits, and new connections reach
// PostgreSQL again. A replica that gave up on a connection meanwhile has
// closed it, and the proxy closes its other side.
func (p *faultProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hole != nil {
		close(p.hole)
		p.hole = nil
	}
}

// blackholed reports whether a blackhole is on.
func (p *faultProxy) blackholed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hole != nil
}

// gone_ reads what client sent while it waited, and reports whether it
// has closed its end since.
func drainWaiting(client net.Conn) (sent []byte, gone bool) {
	buf := make([]byte, 32<<10)
	for {
		_ = client.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		n, err := client.Read(buf)
		sent = append(sent, buf[:n]...)
		var ne net.Error
		switch {
		case err == nil:
			continue
		case errors.As(err, &ne) && ne.Timeout():
			_ = client.SetReadDeadline(time.Time{})
			return sent, false
		default:
			return nil, true
		}
	}
}

// pass returns once nothing is blackholed.
func (p *faultProxy) pass() {
	p.mu.Lock()
	hole := p.hole
	p.mu.Unlock()
	if hole != nil {
		<-hole
	}
}

// Cut resets every live connection and returns how many it cut.
func (p *faultProxy) Cut() int {
	defer p.swallow.Store(false)
	p.mu.Lock()
	cs := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
		delete(p.conns, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		reset(c.client)
		reset(c.server)
	}
	p.cuts.Add(int64(len(cs)))
	return len(cs)
}

// Close stops accepting and closes every connection.
func (p *faultProxy) Close() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
	p.ln.Close()
	p.Heal()
	p.Cut()
}

func (p *faultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepts.Add(1)
		go p.forward(c)
	}
}

func (p *faultProxy) forward(client net.Conn) {
	// Blackholed, the connection is accepted and waits, unanswered.
	var early []byte
	if p.blackholed() {
		p.pass()
		// A client that gave up meanwhile has closed its end, and a
		// healed partition would never deliver its connection: drop it
		// rather than open a session for nobody.
		var gone bool
		if early, gone = drainWaiting(client); gone {
			client.Close()
			return
		}
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		// The database is down: the replica sees its connection closed,
		// as it would see a refused one behind a real proxy.
		reset(client)
		return
	}
	if len(early) > 0 {
		if _, err := server.Write(early); err != nil {
			reset(client)
			server.Close()
			return
		}
	}
	pc := &proxyConn{client: client, server: server}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[pc] = struct{}{}
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(server, client, false) }()
	go func() { defer wg.Done(); p.pipe(client, server, true) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}

// pipe copies from src to dst, delaying each chunk by the latency (and
// dropping it while swallowing, toward the client), until either side
// fails; then it closes both, so the other direction ends too.
func (p *faultProxy) pipe(dst, src net.Conn, toClient bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.latency.Load()); d > 0 {
				time.Sleep(d)
			}
			p.pass()
			if toClient && p.swallow.Load() {
				continue
			}
			if h := p.hold.Load(); !toClient && h != nil && (*h)(buf[:n]) {
				continue
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// reset closes c with an RST instead of a FIN where it can.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
