package example_test

// The sample of docs/testing-other-languages.md: go-nsq publishes to a box started once
// for this package; the test waits for a channel's counts, captures, injects a failed
// publish and moves the clock. Run with `go test` (NSQBOX names the nsqbox program).

import (
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"

	"nsqboxtest"
)

var box *nsqboxtest.Box

func TestMain(m *testing.M) {
	os.Exit(nsqboxtest.Main(m, &box, "--clock", "manual"))
}

func producer(t *testing.T) *nsq.Producer {
	p, err := nsq.NewProducer(box.NSQDTCPAddress, nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	p.SetLogger(log.New(io.Discard, "", 0), nsq.LogLevelError)
	t.Cleanup(p.Stop)
	return p
}

func TestPublishedOrdersAreCapturedAndWaitOnTheChannel(t *testing.T) {
	orders, err := box.Capture("orders")
	if err != nil {
		t.Fatal(err)
	}
	// n=0 only subscribes: the channel exists, so it keeps what is published next
	if _, err := box.Consume("orders", "billing", 0, nil); err != nil {
		t.Fatal(err)
	}
	p := producer(t)
	for _, body := range []string{"order 1", "order 2"} {
		if err := p.Publish("orders", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	billing, err := box.WaitFor("orders", "billing", nsqboxtest.Params{"depth": 2, "in_flight": 0})
	if err != nil || billing.MessageCount != 2 {
		t.Fatalf("billing %+v, %v", billing, err)
	}
	if _, err := orders.Close(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(orders.Bodies(), ","); got != "order 1,order 2" {
		t.Fatalf("captured %s", got)
	}
}

func TestAFailedPublishIsSeenThenPublishingWorksAgain(t *testing.T) {
	if _, err := box.FailPublishes("payments", 1); err != nil {
		t.Fatal(err)
	}
	p := producer(t)
	err := p.Publish("payments", []byte("refused"))
	if err == nil || !strings.Contains(err.Error(), "E_PUB_FAILED") {
		t.Fatalf("the fault's publish: %v", err)
	}
	if err := p.Publish("payments", []byte("accepted")); err != nil {
		t.Fatal(err) // go-nsq reconnects: E_PUB_FAILED closed the connection
	}
	if _, err := box.WaitFor("payments", "", nsqboxtest.Params{"depth": 1, "message_count": 1}); err != nil {
		t.Fatal(err)
	}
}

func TestADeferredMessageFallsDueWhenTheClockMoves(t *testing.T) {
	if _, err := box.Consume("reminders", "mail", 0, nil); err != nil { // the channel
		t.Fatal(err)
	}
	if err := producer(t).DeferredPublish("reminders", time.Hour, []byte("in an hour")); err != nil {
		t.Fatal(err)
	}
	if _, err := box.WaitFor("reminders", "mail", nsqboxtest.Params{"deferred": 1}); err != nil {
		t.Fatal(err)
	}
	if fired, err := box.Advance(time.Hour - time.Second); err != nil || fired != 0 {
		t.Fatalf("a second early: fired %d, %v", fired, err)
	}
	if fired, err := box.Advance(time.Second); err != nil || fired != 1 {
		t.Fatalf("on time: fired %d, %v", fired, err)
	}
	if _, err := box.WaitFor("reminders", "mail", nsqboxtest.Params{"depth": 1}); err != nil {
		t.Fatal(err)
	}
}
