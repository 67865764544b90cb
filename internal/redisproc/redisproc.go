package redisproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoServer reports that the redis-server binary could not be found.
var ErrNoServer = errors.New("redisproc: redis-server not found in PATH (install it: apt-get install -y redis-server)")

// Options configure the servers. The zero value is usable.
type Options struct {
	// Bin is the server binary. Default: "redis-server" from PATH.
	Bin string
	// Host is the loopback address to bind. Default: 127.0.0.1. It must be
	// in 127.0.0.0/8.
	Host string
	// Persistence turns on the append-only file, so that a restarted node
	// remembers its keys. Default: off (--save "" --appendonly no), so that a
	// restart forgets every lock, which is the dangerous case.
	Persistence bool
	// Args are appended to the server command line.
	Args []string
	// StartTimeout bounds the wait for each server to answer PING.
	// Default: 10s.
	StartTimeout time.Duration
	// Password, when set, is required of every client: the default user's
	// (--requirepass) or, with User, that ACL user's (allowed every key,
	// channel and command), the default user then turned off.
	User, Password string
	// UserRules are the ACL rules of User. Default: "~* &* +@all".
	UserRules []string
	// TLS, when set, makes the servers TLS-only (--port 0 --tls-port).
	TLS *TLS
}

// TLS is a server's TLS set-up, and how this package connects to it.
type TLS struct {
	// CertFile and KeyFile are the server's certificate and key, CAFile the
	// CA that verifies client certificates (redis-server wants one even
	// when it asks for none). Absolute paths: the server runs in its data
	// directory.
	CertFile, KeyFile, CAFile string
	// AuthClients requires a client certificate signed by CAFile (mutual
	// TLS).
	AuthClients bool
	// Client is how this package connects for the readiness check and
	// Node.Conn: it must trust the server's certificate (and carry a
	// client certificate with AuthClients).
	Client *tls.Config
}

func (o *Options) fill() error {
	if o.Bin == "" {
		o.Bin = "redis-server"
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if ip := net.ParseIP(o.Host); ip == nil || !ip.IsLoopback() || ip.To4() == nil {
		return fmt.Errorf("redisproc: Host %q is not an IPv4 loopback address", o.Host)
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Second
	}
	if o.User != "" && (o.Password == "" || strings.ContainsAny(o.User, " \t\r\n")) {
		return fmt.Errorf("redisproc: User %q needs a Password and no spaces", o.User)
	}
	if strings.ContainsAny(o.Password, " \t\r\n") {
		return errors.New("redisproc: Password must not contain spaces or line breaks")
	}
	if t := o.TLS; t != nil {
		if t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" || t.Client == nil {
			return errors.New("redisproc: TLS needs CertFile, KeyFile, CAFile and Client")
		}
		for _, f := range []string{t.CertFile, t.KeyFile, t.CAFile} {
			if !filepath.IsAbs(f) {
				return fmt.Errorf("redisproc: TLS file %q must be an absolute path", f)
			}
		}
	}
	return nil
}

// Cluster is a set of independent masters (no replication between them).
type Cluster struct {
	Nodes []*Node
	root  string
}

// Node is one redis-server process. Its address and data directory stay the
// same across restarts.
type Node struct {
	opts Options
	Port int
	Dir  string
	// BusPort is the cluster bus port of a node of a RedisCluster (0
	// otherwise): chosen free like Port, since Port+10000 may not be.
	BusPort int
	// cluster holds the cluster-enabled settings of a RedisCluster's
	// node; nil for a plain server.
	cluster *ClusterOptions
	// sentinelConf is a sentinel's configuration file (which it rewrites
	// as it learns the group); empty for a data node.
	sentinelConf string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
	// held are sockets bound to the node's ports while Kill keeps it
	// down (see holdPorts).
	held []int
}

// Start launches n servers, each on a free port in its own directory under a
// fresh temporary root, and waits until each answers PING. On error every
// server already started is stopped.
func Start(ctx context.Context, n int, opts Options) (*Cluster, error) {
	if n <= 0 {
		return nil, fmt.Errorf("redisproc: need at least one server, got %d", n)
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(opts.Bin); err != nil {
		return nil, ErrNoServer
	}
	root, err := os.MkdirTemp("", "redisproc-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	c := &Cluster{root: root}
	for i := 0; i < n; i++ {
		dir := filepath.Join(root, strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			c.Stop()
			return nil, fmt.Errorf("redisproc: %w", err)
		}
		node := &Node{opts: opts, Dir: dir}
		if err := node.startOnFreePort(ctx); err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	return c, nil
}

// Addrs returns the host:port of every node, in order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// Stop kills every server and removes the data directories. It is safe to
// call more than once.
func (c *Cluster) Stop() error {
	var errs []error
	for _, n := range c.Nodes {
		if err := n.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.root != "" {
		if err := os.RemoveAll(c.root); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Addr is the node's host:port.
func (n *Node) Addr() string { return net.JoinHostPort(n.opts.Host, strconv.Itoa(n.Port)) }

// Conn is how to reach the node: its credentials and TLS client set-up.
func (n *Node) Conn() Conn {
	c := Conn{Username: n.opts.User, Password: n.opts.Password}
	if n.opts.TLS != nil {
		c.TLS = n.opts.TLS.Client
	}
	return c
}

// PID is the server's process id, or 0 when it is not running.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil || n.exitedLocked() {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the process is alive (paused counts as alive).
func (n *Node) Running() bool { return n.PID() != 0 }

func (n *Node) exitedLocked() bool {
	if n.exited == nil {
		return true
	}
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// The kernel may hand the same free port to two callers between our probe
// and the server's bind, so a failed bind is retried on a new port.
func (n *Node) startOnFreePort(ctx context.Context) error {
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort(n.opts.Host)
		if err != nil {
			return err
		}
		n.Port = port
		if n.cluster != nil {
			if n.BusPort, err = freePort(n.opts.Host); err != nil {
				return err
			}
		}
		if last = n.launch(ctx); last == nil {
			return nil
		}
	}
	return last
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("redisproc: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (n *Node) args() []string {
	if n.sentinelConf != "" {
		return []string{n.sentinelConf, "--sentinel", "--port", strconv.Itoa(n.Port),
			"--bind", n.opts.Host, "--dir", n.Dir, "--daemonize", "no", "--pidfile", n.pidFile(),
			"--protected-mode", "no", "--logfile", "redis.log"}
	}
	a := []string{"--port", strconv.Itoa(n.Port)}
	if t := n.opts.TLS; t != nil {
		a = []string{"--port", "0", "--tls-port", strconv.Itoa(n.Port),
			"--tls-cert-file", t.CertFile, "--tls-key-file", t.KeyFile, "--tls-ca-cert-file", t.CAFile,
			"--tls-auth-clients", map[bool]string{true: "yes", false: "no"}[t.AuthClients]}
	}
	switch o := n.opts; {
	case o.User != "":
		rules := o.UserRules
		if len(rules) == 0 {
			rules = []string{"~*", "&*", "+@all"}
		}
		a = append(a, "--user", o.User, "on", ">"+o.Password)
		a = append(append(a, rules...), "--user", "default", "off")
	case o.Password != "":
		a = append(a, "--requirepass", o.Password)
	}
	a = append(a,
		"--bind", n.opts.Host,
		"--dir", n.Dir,
		"--save", "",
		"--daemonize", "no",
		"--pidfile", n.pidFile(),
		"--protected-mode", "no",
		"--logfile", "redis.log",
	)
	if n.opts.Persistence {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	if co := n.cluster; co != nil {
		a = append(a, clusterArgs(n.BusPort, co)...)
	}
	return append(a, n.opts.Args...)
}

// pidFile is where the server writes its process id once it listens on
// its ports: a PING answered at its address proves nothing by itself,
// since another server may hold the port (it took it between freePort's
// probe and our bind, and ours exits, unable to bind). A cluster node
// taken for another's so was sent that one's CLUSTER commands ("Slot 0 is
// already busy").
func (n *Node) pidFile() string { return filepath.Join(n.Dir, "redis.pid") }

// ours reports whether the server that writes n's pid file, once it
// listens, is the process pid.
func (n *Node) ours(pid int) bool {
	b, err := os.ReadFile(n.pidFile())
	return err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid)
}

func (n *Node) launch(ctx context.Context) error {
	// A pid file left by a killed run would vouch for nobody.
	if err := os.Remove(n.pidFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("redisproc: %w", err)
	}
	cmd := exec.Command(n.opts.Bin, n.args()...)
	cmd.Dir = n.Dir
	// Own process group: a terminal's Ctrl-C reaches only the parent, which
	// then stops the servers in order. Pdeathsig covers a parent that dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisproc: start %s: %w", n.opts.Bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	n.mu.Lock()
	n.cmd, n.exited, n.paused = cmd, exited, false
	n.mu.Unlock()

	deadline := time.Now().Add(n.opts.StartTimeout)
	for {
		if err := n.Conn().Ping(n.Addr(), 200*time.Millisecond); err == nil && n.ours(cmd.Process.Pid) {
			n.release()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redisproc: redis-server on %s exited at start: %s", n.Addr(), n.logTail())
		case <-ctx.Done():
			n.kill()
			return fmt.Errorf("redisproc: start %s: %w", n.Addr(), ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.kill()
			return fmt.Errorf("redisproc: %s did not answer PING within %s", n.Addr(), n.opts.StartTimeout)
		}
	}
}

func (n *Node) logTail() string {
	b, err := os.ReadFile(filepath.Join(n.Dir, "redis.log"))
	if err != nil {
		return "(no log)"
	}
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// Kill sends SIGKILL and waits for the process to exit. Killing a node that
// is not running is not an error. Until Restart or Stop the node's ports
// stay its own: a connection is refused, as by a stopped server, and no
// other server can be given them (see holdPorts).
func (n *Node) Kill() error {
	if err := n.kill(); err != nil {
		return err
	}
	n.holdPorts()
	return nil
}

// stop kills the node for good: its ports go back to the kernel.
func (n *Node) stop() error {
	err := n.kill()
	n.release()
	return err
}

// holdPorts binds the ports of a node that was started and is now down,
// without listening, so that they stay the node's until it starts again.
// A port merely left free could be handed by the kernel to a server
// another test starts meanwhile (its port picker avoids only ports in
// use), and a client that redials the address would then find a live
// master where the test killed one, and Restart could not bind it. With
// SO_REUSEADDR on both sides the node's own server binds and listens on
// it over the held socket, which leaves when it answers. If the port is
// already taken, nothing is held.
func (n *Node) holdPorts() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.held != nil {
		return
	}
	ip := net.ParseIP(n.opts.Host).To4()
	for _, port := range []int{n.Port, n.BusPort} {
		if port == 0 {
			continue
		}
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			continue
		}
		sa := &syscall.SockaddrInet4{Port: port}
		copy(sa.Addr[:], ip)
		if syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) != nil || syscall.Bind(fd, sa) != nil {
			syscall.Close(fd)
			continue
		}
		n.held = append(n.held, fd)
	}
}

// release gives back the ports holdPorts bound.
func (n *Node) release() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, fd := range n.held {
		syscall.Close(fd)
	}
	n.held = nil
}

// kill sends SIGKILL and waits for the process to exit.
func (n *Node) kill() error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil || exited == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("redisproc: %s (pid %d) did not exit after SIGKILL", n.Addr(), cmd.Process.Pid)
	}
}

// Pause stops the process with SIGSTOP: its socket stays open but nothing is
// answered, as in a long GC pause or a hung host. It returns once the
// process is stopped (where /proc shows it), so that nothing sent after it
// is answered before Resume.
func (n *Node) Pause() error {
	if err := n.signal(syscall.SIGSTOP, true); err != nil {
		return err
	}
	stat := fmt.Sprintf("/proc/%d/stat", n.PID())
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(stat)
		if err != nil {
			return nil // no /proc, or the process is gone: nothing to wait for
		}
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && (f[0] == "T" || f[0] == "t") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redisproc: %s not stopped 30s after SIGSTOP: %s", n.Addr(), b)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// Resume continues a paused process with SIGCONT.
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT, false) }

// Paused reports whether Pause was called without a matching Resume.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

func (n *Node) signal(sig syscall.Signal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.exitedLocked() {
		return fmt.Errorf("redisproc: %s is not running", n.Addr())
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redisproc: signal %s: %w", n.Addr(), err)
	}
	n.paused = paused
	return nil
}

// Restart kills the node if it runs and starts it again on the same port
// and directory. Without persistence it comes back empty, with a new run_id.
func (n *Node) Restart(ctx context.Context) error {
	if err := n.Kill(); err != nil {
		return err
	}
	var last error
	// The old socket may linger briefly; retry the bind on the same port.
	for attempt := 0; attempt < 20; attempt++ {
		if last = n.launch(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(50 * time.Millisecond):
		}
	}
	return last
}
