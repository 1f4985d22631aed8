package nsqboxtest_test

// The helper's own tests, with the standard library only: a minimal PUB over NSQ's TCP
// protocol stands in for an NSQ client (the go-nsq sample is in example/).

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"nsqboxtest"
)

var box *nsqboxtest.Box

func TestMain(m *testing.M) {
	os.Exit(nsqboxtest.Main(m, &box, "--clock", "manual"))
}

// pub sends one PUB (or DPUB with deferMS) on a new connection; nsqd's error text, if any.
func pub(address, topic, body string, deferMS int) error {
	conn, err := net.DialTimeout("tcp", address, 10*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	command := fmt.Sprintf("PUB %s\n", topic)
	if deferMS > 0 {
		command = fmt.Sprintf("DPUB %s %d\n", topic, deferMS)
	}
	size := make([]byte, 4)
	binary.BigEndian.PutUint32(size, uint32(len(body)))
	if _, err := conn.Write([]byte("  V2" + command + string(size) + body)); err != nil {
		return err
	}
	reader := bufio.NewReader(conn)
	header := make([]byte, 8)
	if _, err := io.ReadFull(reader, header); err != nil {
		return err
	}
	data := make([]byte, binary.BigEndian.Uint32(header[:4])-4)
	if _, err := io.ReadFull(reader, data); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(header[4:]) != 0 || string(data) != "OK" {
		return errors.New(string(data))
	}
	return nil
}

func TestWaitCaptureAndConsume(t *testing.T) {
	capture, err := box.Capture("orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := box.Consume("orders", "billing", 1, nsqboxtest.Params{"timeout": "50ms"}); err == nil {
		t.Fatal("consumed from an empty channel")
	}
	for _, body := range []string{"order 1", "order 2"} {
		if err := pub(box.NSQDTCPAddress, "orders", body, 0); err != nil {
			t.Fatal(err)
		}
	}
	counts, err := box.WaitFor("orders", "billing", nsqboxtest.Params{"depth": 2, "in_flight": 0})
	if err != nil || counts.MessageCount != 2 {
		t.Fatalf("counts %+v, %v", counts, err)
	}
	if _, err := capture.Close(); err != nil {
		t.Fatal(err)
	}
	if got := capture.Bodies(); len(got) != 2 || got[0] != "order 1" || got[1] != "order 2" {
		t.Fatalf("captured %q", got)
	}
	taken, err := box.Consume("orders", "billing", 2, nil)
	if err != nil || len(taken) != 2 || string(taken[1].Body) != "order 2" {
		t.Fatalf("consumed %+v, %v", taken, err)
	}
	_, err = box.WaitFor("orders", "billing", nsqboxtest.Params{"depth": 1, "timeout": "0.1"})
	var refused *nsqboxtest.Error
	if !errors.As(err, &refused) || refused.Status != 408 {
		t.Fatalf("a wait that cannot be met: %v", err)
	}
}

func TestAFailedPublish(t *testing.T) {
	fault, err := box.FailPublishes("payments", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub(box.NSQDTCPAddress, "payments", "refused", 0); err == nil ||
		err.Error() != "E_PUB_FAILED PUB failed fault injected: publish failed" {
		t.Fatalf("the fault's publish: %v", err)
	}
	if err := pub(box.NSQDTCPAddress, "payments", "accepted", 0); err != nil {
		t.Fatal(err)
	}
	if lifted, err := fault.Lift(); err != nil || lifted {
		t.Fatalf("lift a spent fault: %v %v", lifted, err)
	}
}

func TestTheClockMovesOnlyWhenTold(t *testing.T) {
	if _, err := box.Consume("reminders", "mail", 1, nsqboxtest.Params{"timeout": "50ms"}); err == nil {
		t.Fatal("consumed from an empty channel")
	}
	if err := pub(box.NSQDTCPAddress, "reminders", "in an hour", 3600*1000); err != nil {
		t.Fatal(err)
	}
	mail := nsqboxtest.Params{"deferred": 1, "depth": 0}
	if _, err := box.WaitFor("reminders", "mail", mail); err != nil {
		t.Fatal(err)
	}
	if fired, err := box.Advance(time.Hour - time.Second); err != nil || fired != 0 {
		t.Fatalf("a second early: fired %d, %v", fired, err)
	}
	if fired, err := box.Advance(time.Second); err != nil || fired != 1 {
		t.Fatalf("on time: fired %d, %v", fired, err)
	}
	if _, err := box.WaitFor("reminders", "mail", nsqboxtest.Params{"deferred": 0, "depth": 1}); err != nil {
		t.Fatal(err)
	}
}

func TestACaptureSurvivesARestartAndACrash(t *testing.T) {
	capture, err := box.Capture("invoices")
	if err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error { return pub(box.NSQDTCPAddress, "invoices", "before", 0) },
		func() error { return box.Restart(0) },
		func() error { return pub(box.NSQDTCPAddress, "invoices", "after restart", 0) },
		func() error { return box.Crash(0) },
		func() error { return box.StartNode(0) },
		func() error { return pub(box.NSQDTCPAddress, "invoices", "after crash", 0) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := capture.Close(); err != nil {
		t.Fatal(err)
	}
	got := capture.Bodies()
	if len(got) != 3 || got[0] != "before" || got[2] != "after crash" || capture.Lost {
		t.Fatalf("captured %q (lost %v)", got, capture.Lost)
	}
}

func TestTwoBoxesShareNothing(t *testing.T) {
	other, err := nsqboxtest.Start("--clock", "manual")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	capture, err := other.Capture("shared")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.FailPublishes("", 0); err != nil {
		t.Fatal(err)
	}
	before, _ := box.Now()
	if _, err := other.Advance(24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := pub(box.NSQDTCPAddress, "shared", "mine", 0); err != nil {
		t.Fatal(err) // the other box's fault is not this one's
	}
	if after, _ := box.Now(); after != before {
		t.Fatalf("this box's clock moved: %v -> %v", before, after)
	}
	if _, err := capture.Close(); err != nil || len(capture.Messages) != 0 {
		t.Fatalf("the other box captured %q, %v", capture.Bodies(), err)
	}
}
