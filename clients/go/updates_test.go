package supportplatform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type scriptedAnswer func(w http.ResponseWriter)

func answer(status int, body any, headers ...string) scriptedAnswer {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	}
}

// drop closes the connection without an answer: a network error for the client.
func drop(w http.ResponseWriter) {
	conn, _, _ := w.(http.Hijacker).Hijack()
	conn.Close()
}

func item(offset int64) map[string]any {
	return map[string]any{"id": fmt.Sprintf("e%d", offset), "type": "ticket.updated", "timestamp": "t", "workspace_id": "w1",
		"data": map[string]any{"ticket_id": "t1"}, "_links": map[string]any{}, "offset": offset}
}

type recorded struct {
	mu       sync.Mutex
	requests []*http.Request
}

func (r *recorded) offsets() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, req := range r.requests {
		out = append(out, req.URL.Query().Get("offset"))
	}
	return out
}

// scripted serves the answers in order (the last one again when they run out), recording each request.
func scripted(t *testing.T, answers ...scriptedAnswer) (*httptest.Server, *recorded) {
	rec := &recorded{}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.requests = append(rec.requests, r)
		next := answers[0]
		if len(answers) > 1 {
			answers = answers[1:]
		}
		rec.mu.Unlock()
		next(w)
	}))
	t.Cleanup(server.Close)
	return server, rec
}

func take(t *testing.T, u *Updates, count int) []*Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []*Event
	for len(got) < count {
		event, err := u.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, event)
	}
	return got
}

func TestUpdatesAcrossPagesAskEachPageFromThePreviousNextOffset(t *testing.T) {
	server, rec := scripted(t,
		answer(200, map[string]any{"items": []any{item(10), item(11)}, "next_offset": 12}),
		answer(200, map[string]any{"items": []any{}, "next_offset": 12}),
		answer(200, map[string]any{"items": []any{item(20)}, "next_offset": 21}))
	u := &Updates{URL: server.URL, APIKey: "k", Offset: 5, Types: []string{"ticket.updated", "ticket.created"}, TimeoutSeconds: 1}
	var offsets []int64
	for _, e := range take(t, u, 3) {
		offsets = append(offsets, *e.Offset)
	}
	if !slices.Equal(offsets, []int64{10, 11, 20}) || !slices.Equal(rec.offsets(), []string{"5", "12", "12"}) || u.Offset != 21 {
		t.Fatalf("events %v, asked %v, offset %d", offsets, rec.offsets(), u.Offset)
	}
	first := rec.requests[0]
	if first.URL.Query().Get("types") != "ticket.updated,ticket.created" || first.Header.Get("Authorization") != "Bearer k" {
		t.Fatalf("first request %v %v", first.URL, first.Header)
	}
}

func TestAConsumerThatStopsMidPageResumesAfterTheLastEventItTook(t *testing.T) {
	server, _ := scripted(t, answer(200, map[string]any{"items": []any{item(10), item(11), item(12)}, "next_offset": 13}))
	u := &Updates{URL: server.URL, APIKey: "k"}
	take(t, u, 2)
	if u.Offset != 12 {
		t.Fatalf("offset %d", u.Offset)
	}
}

func TestTransientFailuresAreRetriedKeepingTheOffset(t *testing.T) {
	server, rec := scripted(t,
		answer(429, map[string]any{"error_code": "RATE_LIMIT_EXCEEDED"}, "Retry-After", "0"),
		answer(503, map[string]any{"error_code": "SERVICE_UNAVAILABLE"}, "Retry-After", "0"),
		answer(500, map[string]any{"error_code": "INTERNAL_ERROR"}),
		drop,
		answer(502, "bad gateway"),
		answer(200, map[string]any{"items": []any{item(30)}, "next_offset": 31}))
	u := &Updates{URL: server.URL, APIKey: "k", Offset: 30, InitialDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}
	if got := take(t, u, 1); got[0].ID != "e30" {
		t.Fatalf("got %v", got[0].ID)
	}
	if want := []string{"30", "30", "30", "30", "30", "30"}; !slices.Equal(rec.offsets(), want) {
		t.Fatalf("asked %v", rec.offsets())
	}
}

func TestAnAnswerRetryingCannotFixIsReturnedWithItsStatusAndBody(t *testing.T) {
	server, rec := scripted(t, answer(401, map[string]any{"detail": "Invalid API key"}))
	_, err := (&Updates{URL: server.URL, APIKey: "bad"}).Next(context.Background())
	var refused *UpdatesError
	if !errors.As(err, &refused) || refused.Status != 401 || !strings.Contains(refused.Body, "Invalid API key") || len(rec.requests) != 1 {
		t.Fatalf("got %v after %d requests", err, len(rec.requests))
	}
}

func TestACancelledContextStopsAPollWaitingOutABackoff(t *testing.T) {
	server, _ := scripted(t, answer(500, map[string]any{}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := (&Updates{URL: server.URL, APIKey: "k", InitialDelay: time.Minute}).Next(ctx)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestRetryAfterReadsSecondsAndHTTPDatesAndNothingElse(t *testing.T) {
	now := time.Unix(1, 0)
	if d, ok := RetryAfter("3", now); !ok || d != 3*time.Second {
		t.Errorf("seconds: %v %v", d, ok)
	}
	if d, ok := RetryAfter(time.Unix(61, 0).UTC().Format(http.TimeFormat), now); !ok || d != time.Minute {
		t.Errorf("date: %v %v", d, ok)
	}
	for _, bad := range []string{"soon", ""} {
		if _, ok := RetryAfter(bad, now); ok {
			t.Errorf("%q read as a delay", bad)
		}
	}
}
