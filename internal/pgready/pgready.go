// Package pgready waits until a PostgreSQL server accepts connections, the way pg_isready (libpq's
// PQping) decides it, with the standard library only so the gate binary stays small.
//
// One attempt opens a TCP connection (no SSL request), sends a protocol 3.0 StartupMessage for user and
// database "premigrate-probe" and reads the first answer:
//
//   - an authentication request, ParameterStatus, BackendKeyData, ReadyForQuery or NegotiateProtocolVersion:
//     ready;
//   - an ErrorResponse with SQLSTATE 57P03 (cannot_connect_now: the database system is starting up, shutting
//     down or in recovery without hot standby): not ready;
//   - any other ErrorResponse (no such role 28000, bad password 28P01, no such database 3D000, too many
//     clients 53300, ...): ready, because the server did accept the connection and judged the request;
//   - a refused or failed dial, no answer, the connection closed, or an answer that is not the PostgreSQL
//     protocol: not ready.
//
// The probe never authenticates, so it needs no credentials; like pg_isready, it may make the server log a
// FATAL line such as `role "premigrate-probe" does not exist` once it is ready.
package pgready

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

const (
	probeUser     = "premigrate-probe"
	probeDatabase = "premigrate-probe"

	protocolVersion3 = 3 << 16

	// sqlstateCannotConnectNow is 57P03, which a server answers while it starts up, shuts down or
	// recovers: the one error that means "not ready".
	sqlstateCannotConnectNow = "57P03"

	// maxMessageLength bounds the first message read: it is small (an authentication request or an
	// ErrorResponse), so a larger length means the peer does not speak the PostgreSQL protocol.
	maxMessageLength = 64 << 10
	// maxNotices is how many NoticeResponses are skipped before the answer that counts.
	maxNotices = 8
)

// Defaults of Wait and Check.
const (
	RetryInterval    = 500 * time.Millisecond
	ProgressInterval = 10 * time.Second
	AttemptTimeout   = 5 * time.Second
)

// TimeoutError is Wait's error when the server did not accept connections within the timeout.
type TimeoutError struct {
	Addr    string
	Timeout time.Duration
	// Reason is why the last attempt found the server not ready.
	Reason string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("PostgreSQL at %s did not accept connections within %s; last attempt: %s", e.Addr, e.Timeout, e.Reason)
}

// Wait returns nil once the PostgreSQL server at addr (host:port) accepts connections, trying every
// RetryInterval. While it waits it calls logf (when not nil) at most every ProgressInterval with
// `waiting for PostgreSQL at ADDR to accept connections (elapsed 20s): REASON`. It returns a *TimeoutError
// when timeout passes, ctx's error (wrapped) when ctx ends first, and an error at once for an addr that is
// not host:port.
func Wait(ctx context.Context, addr string, timeout time.Duration, logf func(string, ...any)) error {
	w := waiter{retry: RetryInterval, progress: ProgressInterval, attempt: AttemptTimeout}
	return w.wait(ctx, addr, timeout, logf)
}

// Check makes one attempt (bounded by AttemptTimeout) and reports whether the server at addr accepts
// connections, and why or why not. err is not nil only when retrying cannot help: ctx ended, or addr is
// not host:port.
func Check(ctx context.Context, addr string) (ready bool, reason string, err error) {
	return check(ctx, addr, AttemptTimeout)
}

// waiter is Wait with its intervals replaceable in tests.
type waiter struct {
	retry, progress, attempt time.Duration
}

func (w waiter) wait(ctx context.Context, addr string, timeout time.Duration, logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	start := time.Now()
	deadline := start.Add(timeout)
	lastLog := start
	var reason string // why the last finished attempt found the server not ready
	for {
		attemptCtx, cancel := context.WithDeadline(ctx, deadline)
		ready, why, err := check(attemptCtx, addr, w.attempt)
		cancel()
		if ready {
			return nil
		}
		if why != "" {
			reason = why
		}
		if ctx.Err() != nil {
			return ctxError(ctx, addr, reason)
		}
		now := time.Now()
		if !now.Before(deadline) {
			return &TimeoutError{Addr: addr, Timeout: timeout, Reason: orUnknown(reason)}
		}
		if err != nil {
			return err
		}
		if now.Sub(lastLog) >= w.progress {
			logf("waiting for PostgreSQL at %s to accept connections (elapsed %s): %s", addr, now.Sub(start).Round(time.Second), reason)
			lastLog = now
		}
		pause := time.NewTimer(min(w.retry, deadline.Sub(now)))
		select {
		case <-ctx.Done():
			pause.Stop()
			return ctxError(ctx, addr, reason)
		case <-pause.C:
		}
	}
}

func ctxError(ctx context.Context, addr, reason string) error {
	if reason == "" {
		return fmt.Errorf("waiting for PostgreSQL at %s: %w", addr, ctx.Err())
	}
	return fmt.Errorf("waiting for PostgreSQL at %s (last attempt: %s): %w", addr, reason, ctx.Err())
}

func orUnknown(reason string) string {
	if reason == "" {
		return "no attempt finished"
	}
	return reason
}

// check is one attempt, given at most attempt.
func check(ctx context.Context, addr string, attempt time.Duration) (bool, string, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return false, "", fmt.Errorf("PostgreSQL address %q is not host:port: %w", addr, err)
	}
	if err := ctx.Err(); err != nil {
		return false, "", fmt.Errorf("checking PostgreSQL at %s: %w", addr, err)
	}
	attemptCtx, cancel := context.WithTimeout(ctx, attempt)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(attemptCtx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return false, "", fmt.Errorf("checking PostgreSQL at %s: %w", addr, ctx.Err())
		}
		return false, err.Error(), nil
	}
	defer func() { _ = conn.Close() }()
	// Unblock the write and the read below when the attempt's time is up or ctx ends.
	stop := context.AfterFunc(attemptCtx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	ready, reason, terminate, err := handshake(conn)
	if err != nil {
		if ctx.Err() != nil {
			return false, "", fmt.Errorf("checking PostgreSQL at %s: %w", addr, ctx.Err())
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false, fmt.Sprintf("no answer to the startup message within %s", attempt), nil
		}
		return false, err.Error(), nil
	}
	if terminate {
		// The session started: end it the polite way. A server that answered an error or is asking for a
		// password gets no Terminate: it has closed the connection, or would log a protocol violation
		// ("expected password response"), whereas a client that just disconnects is legal and unlogged.
		_, _ = conn.Write([]byte{'X', 0, 0, 0, 4})
	}
	return ready, reason, nil
}

// handshake sends the StartupMessage and interprets the first answer. terminate is true when the session
// started (authentication passed), so the connection should end with a Terminate message.
func handshake(conn net.Conn) (ready bool, reason string, terminate bool, err error) {
	if _, err := conn.Write(startupMessage()); err != nil {
		return false, "", false, fmt.Errorf("sending the startup message: %w", err)
	}
	r := bufio.NewReader(conn)
	for range maxNotices + 1 {
		typ, body, err := readMessage(r)
		if err != nil {
			return false, "", false, err
		}
		switch typ {
		case 'N': // NoticeResponse: informational, the answer follows
			continue
		case 'R':
			if len(body) < 4 {
				return false, "", false, fmt.Errorf("malformed authentication request (%d bytes)", len(body))
			}
			if code := binary.BigEndian.Uint32(body); code != 0 {
				return true, fmt.Sprintf("the server asks for authentication (method %d)", code), false, nil
			}
			return true, "the server accepted the connection", true, nil
		case 'S', 'K', 'Z', 'v':
			return true, "the server accepted the connection", true, nil
		case 'E':
			fields := errorFields(body)
			if fields['C'] == sqlstateCannotConnectNow {
				return false, fmt.Sprintf("%s (SQLSTATE %s)", fields['M'], fields['C']), false, nil
			}
			return true, fmt.Sprintf("the server is up and refused the probe: %s (SQLSTATE %s)", fields['M'], fields['C']), false, nil
		default:
			return false, "", false, fmt.Errorf("the answer is not the PostgreSQL protocol (message type %q)", typ)
		}
	}
	return false, "", false, fmt.Errorf("more than %d notices before an answer", maxNotices)
}

// startupMessage is the protocol 3.0 StartupMessage for probeUser and probeDatabase.
func startupMessage() []byte {
	var params bytes.Buffer
	for _, s := range []string{"user", probeUser, "database", probeDatabase, ""} {
		params.WriteString(s)
		params.WriteByte(0)
	}
	msg := binary.BigEndian.AppendUint32(nil, uint32(8+params.Len()))
	msg = binary.BigEndian.AppendUint32(msg, protocolVersion3)
	return append(msg, params.Bytes()...)
}

// readMessage reads one backend message: its type byte and its body.
func readMessage(r *bufio.Reader) (byte, []byte, error) {
	var header [5]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, errors.New("the server closed the connection without answering the startup message")
		}
		return 0, nil, fmt.Errorf("reading the answer to the startup message: %w", err)
	}
	typ := header[0]
	length := binary.BigEndian.Uint32(header[1:])
	if length < 4 || length > maxMessageLength {
		return 0, nil, fmt.Errorf("the answer is not the PostgreSQL protocol (starts with %q)", header[:])
	}
	body := make([]byte, length-4)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("the server closed the connection in the middle of a %q message", typ)
		}
		return 0, nil, fmt.Errorf("reading a %q message: %w", typ, err)
	}
	return typ, body, nil
}

// errorFields parses the body of an ErrorResponse or NoticeResponse: a field type byte and a
// NUL-terminated string per field, then a NUL.
func errorFields(body []byte) map[byte]string {
	fields := map[byte]string{}
	for len(body) > 0 && body[0] != 0 {
		typ := body[0]
		value, rest, found := bytes.Cut(body[1:], []byte{0})
		if !found {
			break
		}
		fields[typ] = string(value)
		body = rest
	}
	return fields
}
