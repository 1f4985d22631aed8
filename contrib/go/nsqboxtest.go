// Package nsqboxtest starts nsqbox (NSQ in a box) once per test package and drives it
// over its admin service: wait for a topic's or channel's counts, capture what is
// published, consume messages, inject faults, move the broker clock. See
// docs/testing-other-languages.md.
//
// Start a box in TestMain, once for the package:
//
//	var box *nsqboxtest.Box
//
//	func TestMain(m *testing.M) {
//		os.Exit(nsqboxtest.Main(m, &box, "--clock", "manual"))
//	}
//
// The nsqbox program is $NSQBOX, else "nsqbox" on PATH. It needs only the standard
// library; your tests publish and consume with any NSQ client (go-nsq) at
// box.NSQDTCPAddress.
package nsqboxtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Error is an admin route's answer other than 2xx: Status and Code (NSQ's "message").
type Error struct {
	Method, Route string
	Status        int
	Code          string
}

func (e *Error) Error() string {
	return fmt.Sprintf("nsqbox: %s %s: %d %s", e.Method, e.Route, e.Status, e.Code)
}

// Box is one running nsqbox: its addresses, and the handle's operations.
type Box struct {
	NSQDTCPAddress     string `json:"nsqd_tcp_address"`
	NSQDHTTPAddress    string `json:"nsqd_http_address"`
	LookupdTCPAddress  string `json:"lookupd_tcp_address"`
	LookupdHTTPAddress string `json:"lookupd_http_address"`
	AdminHTTPAddress   string `json:"admin_http_address"`

	cmd      *exec.Cmd
	dataPath string
	client   *http.Client
}

// Params are a route's query parameters (nil values are left out).
type Params map[string]any

// Start runs `nsqbox up --ephemeral-ports --ready-json` with args in a new data directory
// and returns once every service answers (at most 30 s).
func Start(args ...string) (*Box, error) {
	program := os.Getenv("NSQBOX")
	if program == "" {
		program = "nsqbox"
	}
	dataPath, err := os.MkdirTemp("", "nsqbox-go-")
	if err != nil {
		return nil, err
	}
	argv := append([]string{"up", "--ephemeral-ports", "--ready-json", "--data-path", dataPath}, args...)
	cmd := exec.Command(program, argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dataPath)
		return nil, fmt.Errorf("nsqbox: could not run %s (set NSQBOX): %w", program, err)
	}
	ready := make(chan []byte, 1)
	go func() {
		reader := bufio.NewReader(stdout)
		line, _ := reader.ReadBytes('\n')
		ready <- line
		io.Copy(io.Discard, reader) // keep draining: a full pipe would stall the box
	}()
	box := &Box{cmd: cmd, dataPath: dataPath, client: &http.Client{Timeout: 90 * time.Second}}
	select {
	case line := <-ready:
		if err := json.Unmarshal(line, box); err != nil || box.AdminHTTPAddress == "" {
			box.Stop()
			return nil, fmt.Errorf("nsqbox: %s up did not start: %s", program, stderr.String())
		}
	case <-time.After(30 * time.Second):
		box.Stop()
		return nil, fmt.Errorf("nsqbox: %s up did not start in 30s: %s", program, stderr.String())
	}
	return box, nil
}

// Main starts a box into *box, runs the package's tests and stops it: call it from
// TestMain as os.Exit(nsqboxtest.Main(m, &box, args...)).
func Main(m *testing.M, box **Box, args ...string) int {
	started, err := Start(args...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*box = started
	defer started.Stop()
	return m.Run()
}

// Stop ends the box (SIGTERM: a clean shutdown) and removes its data.
func (b *Box) Stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		b.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { b.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			b.cmd.Process.Kill()
			<-done
		}
		b.cmd = nil
	}
	os.RemoveAll(b.dataPath)
}

// Request sends one admin route and decodes its JSON answer into out (nil: ignored).
func (b *Box) Request(method, route string, params Params, out any) error {
	query := url.Values{}
	for key, value := range params {
		if value != nil {
			query.Set(key, fmt.Sprint(value))
		}
	}
	target := "http://" + b.AdminHTTPAddress + route
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	request, err := http.NewRequest(method, target, nil)
	if err != nil {
		return err
	}
	response, err := b.client.Do(request)
	if err != nil {
		return err
	}
	defer response.Body.Close()
	body, err := io.ReadAll(io.LimitReader(response.Body, 256<<20))
	if err != nil {
		return err
	}
	if response.StatusCode/100 != 2 {
		var doc struct{ Message string }
		code := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &doc) == nil && doc.Message != "" {
			code = doc.Message
		}
		return &Error{method, route, response.StatusCode, code}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

// Counts are a topic's or channel's counts, summed over the nsqds.
type Counts struct {
	Depth        int `json:"depth"`
	InFlight     int `json:"in_flight"`
	Deferred     int `json:"deferred"`
	MessageCount int `json:"message_count"`
	RequeueCount int `json:"requeue_count"`
	TimeoutCount int `json:"timeout_count"`
	Clients      int `json:"clients"`
}

// WaitFor waits until the topic (channel "" for the topic itself) exists with every count
// in want ("depth", "in_flight", "deferred", "message_count", "requeue_count",
// "timeout_count", "clients"; "timeout": seconds or a Go duration, at most 60 s, 10 s by
// default). On timeout the *Error (Status 408) says what it last saw.
func (b *Box) WaitFor(topic, channel string, want Params) (Counts, error) {
	route := "/api/wait/" + url.PathEscape(topic)
	if channel != "" {
		route += "/" + url.PathEscape(channel)
	}
	var counts Counts
	err := b.Request("GET", route, want, &counts)
	return counts, err
}

// Message is one captured or consumed message.
type Message struct {
	ID        string `json:"id"`
	Body      []byte `json:"body"` // base64 in JSON: decoded by encoding/json
	Timestamp int64  `json:"timestamp"`
	DeferMS   int64  `json:"defer_ms"`
	Attempts  int    `json:"attempts"`
	Node      int    `json:"node"`
}

// Capture records every message published to a topic while it is open.
type Capture struct {
	box      *Box
	ID       string
	Topic    string
	Messages []Message
	// Lost says messages may be missing (a node was down when the capture ended).
	Lost bool
}

// Capture starts recording every message published to topic.
func (b *Box) Capture(topic string) (*Capture, error) {
	var doc struct{ ID string }
	if err := b.Request("POST", "/api/captures", Params{"topic": topic}, &doc); err != nil {
		return nil, err
	}
	return &Capture{box: b, ID: doc.ID, Topic: topic}, nil
}

func (c *Capture) take(method string) ([]Message, error) {
	var doc struct {
		Messages []Message
		Lost     bool
	}
	params := Params{"from": len(c.Messages)}
	if err := c.box.Request(method, "/api/captures/"+c.ID, params, &doc); err != nil {
		return c.Messages, err
	}
	c.Messages = append(c.Messages, doc.Messages...)
	c.Lost = doc.Lost
	return c.Messages, nil
}

// Read returns every message captured so far.
func (c *Capture) Read() ([]Message, error) { return c.take("GET") }

// Close ends the capture and returns every message it captured.
func (c *Capture) Close() ([]Message, error) { return c.take("DELETE") }

// Bodies are the captured bodies as strings.
func (c *Capture) Bodies() []string {
	out := make([]string, len(c.Messages))
	for i, m := range c.Messages {
		out[i] = string(m.Body)
	}
	return out
}

// Consume takes exactly n messages of the channel (finishing them) and returns them;
// params may add "timeout" and "node".
func (b *Box) Consume(topic, channel string, n int, params Params) ([]Message, error) {
	all := Params{"n": n}
	for k, v := range params {
		all[k] = v
	}
	var doc struct{ Messages []Message }
	route := "/api/consume/" + url.PathEscape(topic) + "/" + url.PathEscape(channel)
	err := b.Request("POST", route, all, &doc)
	return doc.Messages, err
}

// Fault is a lasting fault in force.
type Fault struct {
	box  *Box
	ID   int    `json:"id"`
	Kind string `json:"kind"`
	Node string `json:"node"`
}

// AddFault starts a lasting fault: kind "fail_publishes", "disk_full", "latency", "stall",
// "hide_producers" or "lookupd_down", with its parameters (see docs/faults.md).
func (b *Box) AddFault(kind string, params Params) (*Fault, error) {
	fault := &Fault{box: b}
	if err := b.Request("POST", "/api/faults/"+kind, params, fault); err != nil {
		return nil, err
	}
	return fault, nil
}

// FailPublishes makes PUB, MPUB and DPUB to topic ("" for any) fail: the next count
// commands (0: until lifted).
func (b *Box) FailPublishes(topic string, count int) (*Fault, error) {
	params := Params{}
	if topic != "" {
		params["topic"] = topic
	}
	if count > 0 {
		params["count"] = count
	}
	return b.AddFault("fail_publishes", params)
}

// Lift ends the fault; false when it had ended already.
func (f *Fault) Lift() (bool, error) {
	var doc struct{ Lifted bool }
	err := f.box.Request("DELETE", fmt.Sprintf("/api/faults/%d", f.ID), Params{"node": f.Node}, &doc)
	return doc.Lifted, err
}

// LiftAll ends every fault; how many there were.
func (b *Box) LiftAll() (int, error) {
	var doc struct{ Lifted int }
	err := b.Request("DELETE", "/api/faults", nil, &doc)
	return doc.Lifted, err
}

// Restart shuts nsqd node down cleanly and starts it again (same ports, same data).
func (b *Box) Restart(node int) error {
	return b.Request("POST", "/api/faults/restart", Params{"node": node}, nil)
}

// Crash stops nsqd node as a SIGKILL would; it stays down until Start.
func (b *Box) Crash(node int) error {
	return b.Request("POST", "/api/faults/crash", Params{"node": node}, nil)
}

// StartNode starts a crashed nsqd again.
func (b *Box) StartNode(node int) error {
	return b.Request("POST", "/api/faults/start", Params{"node": node}, nil)
}

type clockDoc struct {
	Clocks []struct {
		Now float64 `json:"now"`
	} `json:"clocks"`
	Fired int `json:"fired"`
}

// Now is broker time, epoch seconds.
func (b *Box) Now() (float64, error) {
	var doc clockDoc
	if err := b.Request("GET", "/api/clock", nil, &doc); err != nil {
		return 0, err
	}
	if len(doc.Clocks) == 0 {
		return 0, errors.New("nsqbox: the box reports no clock")
	}
	return doc.Clocks[0].Now, nil
}

// Advance moves a manual clock by a Go duration ("1h") and returns how many deferred
// messages, REQ delays and in-flight timeouts fired.
func (b *Box) Advance(by time.Duration) (int, error) {
	var doc clockDoc
	err := b.Request("POST", "/api/clock/advance", Params{"by": by.String()}, &doc)
	return doc.Fired, err
}
