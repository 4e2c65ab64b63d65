package pgready

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/premigrate/premigrate/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// message is a backend message: type byte, length, body.
func message(typ byte, body []byte) []byte {
	msg := append([]byte{typ}, binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))...)
	return append(msg, body...)
}

func authRequest(code uint32, extra string) []byte {
	return message('R', append(binary.BigEndian.AppendUint32(nil, code), extra...))
}

func errorResponse(severity, sqlstate, text string) []byte {
	var body []byte
	for _, f := range []struct {
		typ   byte
		value string
	}{{'S', severity}, {'V', severity}, {'C', sqlstate}, {'M', text}} {
		body = append(append(append(body, f.typ), f.value...), 0)
	}
	return message('E', append(body, 0))
}

// noAnswer makes the fake server read the startup message and then say nothing.
var noAnswer = []byte("(no answer)")

// fakeConn is what one client sent the fake server.
type fakeConn struct {
	startup []byte // the startup message
	after   []byte // what the client sent after the answer, until it closed the connection
}

// fakeServer answers the startup message of its n-th connection with answers[n] (the last one repeats):
// nil closes the connection at once, noAnswer keeps silent. Like a real server it closes the connection
// after an ErrorResponse. It records what each client sent.
type fakeServer struct {
	addr string

	mu    sync.Mutex
	conns []fakeConn
	wg    sync.WaitGroup
}

func startFakeServer(t *testing.T, answers ...[]byte) *fakeServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{addr: l.Addr().String()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for n := 0; ; n++ {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			answer := answers[min(n, len(answers)-1)]
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(conn, answer)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		s.wg.Wait()
	})
	return s
}

func (s *fakeServer) serve(conn net.Conn, answer []byte) {
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var c fakeConn
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.conns = append(s.conns, c)
	}()
	var length [4]byte
	if _, err := io.ReadFull(conn, length[:]); err != nil {
		return
	}
	c.startup = make([]byte, binary.BigEndian.Uint32(length[:]))
	copy(c.startup, length[:])
	if _, err := io.ReadFull(conn, c.startup[4:]); err != nil {
		return
	}
	switch {
	case answer == nil:
		return
	case bytes.Equal(answer, noAnswer):
		c.after, _ = io.ReadAll(conn)
		return
	}
	if _, err := conn.Write(answer); err != nil || answer[0] == 'E' {
		return
	}
	c.after, _ = io.ReadAll(conn)
}

// received returns what the clients sent, once they all closed their connections.
func (s *fakeServer) received(t *testing.T, want int) []fakeConn {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		conns := append([]fakeConn(nil), s.conns...)
		s.mu.Unlock()
		if len(conns) >= want || time.Now().After(deadline) {
			return conns
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(pgtest.FreePort(t)))
}

func TestCheckSendsAProtocol3StartupMessageForThePremigrateProbeUserAndDatabaseWithoutSSL(t *testing.T) {
	s := startFakeServer(t, errorResponse("FATAL", "28000", `role "premigrate-probe" does not exist`))
	if _, _, err := Check(context.Background(), s.addr); err != nil {
		t.Fatal(err)
	}
	conns := s.received(t, 1)
	if len(conns) != 1 {
		t.Fatalf("the server saw %d connections, want 1", len(conns))
	}
	want := binary.BigEndian.AppendUint32(nil, 0)
	want = binary.BigEndian.AppendUint32(want, 3<<16) // 3.0, not the SSLRequest code 80877103
	want = append(want, "user\x00premigrate-probe\x00database\x00premigrate-probe\x00\x00"...)
	binary.BigEndian.PutUint32(want, uint32(len(want)))
	if got := conns[0].startup; !bytes.Equal(got, want) {
		t.Errorf("startup message\n got %q\nwant %q", got, want)
	}
}

func TestCheckJudgesTheServersFirstAnswerAsPgIsreadyDoes(t *testing.T) {
	cases := []struct {
		name          string
		answer        []byte
		wantReady     bool
		wantReason    string
		wantTerminate bool
	}{
		{name: "starting up is not ready", answer: errorResponse("FATAL", "57P03", "the database system is starting up"),
			wantReason: "the database system is starting up (SQLSTATE 57P03)"},
		{name: "shutting down is not ready", answer: errorResponse("FATAL", "57P03", "the database system is shutting down"),
			wantReason: "the database system is shutting down (SQLSTATE 57P03)"},
		{name: "a notice then starting up is not ready",
			answer:     append(message('N', []byte("SNOTICE\x00C00000\x00Mhello\x00\x00")), errorResponse("FATAL", "57P03", "the database system is starting up")...),
			wantReason: "starting up (SQLSTATE 57P03)"},
		{name: "a wrong password is ready", answer: errorResponse("FATAL", "28P01", `password authentication failed for user "premigrate-probe"`),
			wantReady: true, wantReason: "28P01"},
		{name: "an unknown role is ready", answer: errorResponse("FATAL", "28000", `role "premigrate-probe" does not exist`),
			wantReady: true, wantReason: "28000"},
		{name: "a missing database is ready", answer: errorResponse("FATAL", "3D000", `database "premigrate-probe" does not exist`),
			wantReady: true, wantReason: "3D000"},
		{name: "too many clients is ready", answer: errorResponse("FATAL", "53300", "sorry, too many clients already"),
			wantReady: true, wantReason: "53300"},
		{name: "an MD5 password request is ready", answer: authRequest(5, "salt"),
			wantReady: true, wantReason: "authentication"},
		{name: "a SCRAM request is ready", answer: authRequest(10, "SCRAM-SHA-256\x00\x00"),
			wantReady: true, wantReason: "authentication"},
		{name: "trust authentication is ready and ends with Terminate",
			answer:    append(authRequest(0, ""), message('S', []byte("server_version\x0015.0\x00"))...),
			wantReady: true, wantReason: "accepted", wantTerminate: true},
		{name: "closing without an answer is not ready", answer: nil,
			wantReason: "closed the connection without answering"},
		{name: "an HTTP server is not ready", answer: []byte("HTTP/1.1 400 Bad Request\r\n\r\n"),
			wantReason: "not the PostgreSQL protocol"},
		{name: "an unknown message type is not ready", answer: message('?', nil),
			wantReason: "not the PostgreSQL protocol"},
		{name: "silence is not ready", answer: noAnswer,
			wantReason: "no answer to the startup message within 300ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := startFakeServer(t, tc.answer)
			ready, reason, err := check(context.Background(), s.addr, 300*time.Millisecond)
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if ready != tc.wantReady || !strings.Contains(reason, tc.wantReason) {
				t.Errorf("check = %v, %q; want %v and a reason containing %q", ready, reason, tc.wantReady, tc.wantReason)
			}
			conns := s.received(t, 1)
			if len(conns) != 1 {
				t.Fatalf("the server saw %d connections, want 1", len(conns))
			}
			terminate := []byte{'X', 0, 0, 0, 4}
			if got := conns[0].after; bytes.Equal(got, terminate) != tc.wantTerminate || (!tc.wantTerminate && len(got) > 0) {
				t.Errorf("after the answer the client sent %q; want Terminate: %v", got, tc.wantTerminate)
			}
		})
	}
}

func TestCheckIsNotReadyOnAClosedPort(t *testing.T) {
	ready, reason, err := Check(context.Background(), closedAddr(t))
	if err != nil || ready || !strings.Contains(reason, "connection refused") {
		t.Errorf("Check = %v, %q, %v; want not ready because the connection was refused", ready, reason, err)
	}
}

func TestWaitKeepsTryingWhileTheServerIsStartingUpAndReturnsOnceItAnswers(t *testing.T) {
	startingUp := errorResponse("FATAL", "57P03", "the database system is starting up")
	s := startFakeServer(t, startingUp, startingUp, errorResponse("FATAL", "28P01", "password authentication failed"))
	start := time.Now()
	if err := Wait(context.Background(), s.addr, 10*time.Second, t.Logf); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if took := time.Since(start); took < 2*RetryInterval {
		t.Errorf("Wait returned after %s: want two pauses of %s between three attempts", took, RetryInterval)
	}
	if conns := s.received(t, 3); len(conns) != 3 {
		t.Errorf("the server saw %d connections, want 3", len(conns))
	}
}

func TestWaitTimesOutWithAnErrorNamingTheAddressTheTimeoutAndTheLastReason(t *testing.T) {
	cases := []struct {
		name       string
		addr       func(t *testing.T) string
		wantReason string
	}{
		{name: "nothing listens", addr: closedAddr, wantReason: "connection refused"},
		{name: "the server stays in startup", addr: func(t *testing.T) string {
			return startFakeServer(t, errorResponse("FATAL", "57P03", "the database system is starting up")).addr
		}, wantReason: "the database system is starting up (SQLSTATE 57P03)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := tc.addr(t)
			const timeout = 1500 * time.Millisecond
			start := time.Now()
			err := Wait(context.Background(), addr, timeout, t.Logf)
			took := time.Since(start)
			var timeoutErr *TimeoutError
			if !errors.As(err, &timeoutErr) {
				t.Fatalf("Wait = %v, want a *TimeoutError", err)
			}
			for _, want := range []string{"PostgreSQL at " + addr, "did not accept connections within 1.5s", tc.wantReason} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if took < timeout || took > timeout+time.Second {
				t.Errorf("Wait returned after %s, want about %s", took, timeout)
			}
		})
	}
}

func TestWaitLogsProgressAtMostEveryProgressInterval(t *testing.T) {
	addr := closedAddr(t)
	var lines []string
	logf := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	w := waiter{retry: 20 * time.Millisecond, progress: 300 * time.Millisecond, attempt: time.Second}
	if err := w.wait(context.Background(), addr, 1100*time.Millisecond, logf); err == nil {
		t.Fatal("wait succeeded on a closed port")
	}
	if len(lines) < 2 || len(lines) > 3 {
		t.Errorf("got %d progress lines in 1.1s at most every 300ms, want 2 or 3:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	line := regexp.MustCompile(`^waiting for PostgreSQL at ` + regexp.QuoteMeta(addr) +
		` to accept connections \(elapsed [01]s\): dial tcp .*: connection refused$`)
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Errorf("progress line %q does not match %s", l, line)
		}
	}
}

func TestWaitReturnsCtxsErrorWhenCtxEnds(t *testing.T) {
	addr := closedAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Wait(ctx, addr, time.Minute, t.Logf)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), addr) {
		t.Errorf("Wait = %v, want ctx's error naming %s", err, addr)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Wait returned %s after ctx ended", took-300*time.Millisecond)
	}
}

func TestWaitRejectsAnAddressWithoutAPortAtOnce(t *testing.T) {
	start := time.Now()
	err := Wait(context.Background(), "db.shop.svc", time.Minute, t.Logf)
	if err == nil || !strings.Contains(err.Error(), `"db.shop.svc" is not host:port`) {
		t.Errorf("Wait = %v, want an error about the address", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Wait took %s to reject the address", took)
	}
}

func TestWaitReturnsAtOnceForARunningServer(t *testing.T) {
	s := pgtest.Shared(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	ready, reason, err := Check(context.Background(), addr)
	if err != nil || !ready {
		t.Fatalf("Check = %v, %q, %v; want ready", ready, reason, err)
	}
	start := time.Now()
	if err := Wait(context.Background(), addr, 10*time.Second, t.Logf); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if took := time.Since(start); took > RetryInterval {
		t.Errorf("Wait took %s for a running server, want one attempt", took)
	}
}

func TestWaitReturnsOnceAServerStartsOnThePortThatRefusedItsFirstAttempts(t *testing.T) {
	s := pgtest.Prepare(t) // initialised, with a port, not running
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	if ready, reason, err := Check(context.Background(), addr); err != nil || ready || !strings.Contains(reason, "connection refused") {
		t.Fatalf("Check before the server starts = %v, %q, %v; want not ready, connection refused", ready, reason, err)
	}
	done := make(chan error, 1)
	go func() { done <- Wait(context.Background(), addr, 2*time.Minute, t.Logf) }()
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before the server started", err)
	case <-time.After(3 * time.Second):
	}
	s.Launch(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Wait did not return within a minute of the server accepting connections")
	}
}
