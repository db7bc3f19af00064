package supportplatform

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Updates long-polls GET /api/v1/updates: Next gives the events in log order and moves Offset past
// each (store it to resume after a restart); it waits as told by 429 and 503 Retry-After, backs off
// exponentially on other 5xx and network errors, and returns an *UpdatesError for any other answer
// (a bad key, a bad query), which retrying would not fix.
type Updates struct {
	// URL is the service's base address, e.g. http://localhost:8080.
	URL    string
	APIKey string
	// Offset in microseconds, inclusive: 0 for the whole history, time.Now().UnixMicro() for from now on.
	Offset int64
	Types  []string
	// TimeoutSeconds the server holds a poll open when nothing is there (0..60; 0 means 30).
	TimeoutSeconds int
	// InitialDelay is the first backoff after a failure (0 means 1 s), doubled up to MaxDelay (0 means 30 s).
	InitialDelay time.Duration
	MaxDelay     time.Duration
	// Client is http.DefaultClient when nil.
	Client *http.Client

	page []json.RawMessage
}

// UpdatesError is an answer of /updates that retrying would not fix.
type UpdatesError struct {
	Status int
	Body   string
}

func (e *UpdatesError) Error() string {
	return fmt.Sprintf("GET /api/v1/updates answered %d: %s", e.Status, e.Body)
}

// RetryAfter reads a Retry-After value (delay-seconds or an HTTP date) relative to now; false when
// absent or unreadable.
func RetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if seconds, err := strconv.ParseUint(value, 10, 32); err == nil {
		return time.Duration(seconds) * time.Second, true
	}
	if date, err := http.ParseTime(value); err == nil {
		return max(0, date.Sub(now)), true
	}
	return 0, false
}

func (u *Updates) request(ctx context.Context) (*http.Request, error) {
	query := url.Values{"offset": {strconv.FormatInt(u.Offset, 10)}, "timeout": {strconv.Itoa(u.timeoutSeconds())}}
	if len(u.Types) > 0 {
		query.Set("types", strings.Join(u.Types, ","))
	}
	base, err := url.Parse(u.URL)
	if err != nil {
		return nil, err
	}
	address := base.ResolveReference(&url.URL{Path: "/api/v1/updates", RawQuery: query.Encode()})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+u.APIKey)
	return req, nil
}

func (u *Updates) timeoutSeconds() int {
	if u.TimeoutSeconds == 0 {
		return 30
	}
	return u.TimeoutSeconds
}

func orDefault(d, fallback time.Duration) time.Duration {
	if d == 0 {
		return fallback
	}
	return d
}

type updatesPage struct {
	Items      []json.RawMessage `json:"items"`
	NextOffset int64             `json:"next_offset"`
}

// attempt asks for one page. A nil page and nil error mean a transient failure, to retry after
// retryAfter when the server said so (told).
func (u *Updates) attempt(ctx context.Context, client *http.Client) (page *updatesPage, retryAfter time.Duration, told bool, err error) {
	// A poll the server holds open answers within its timeout: one silent for 30 s more is lost.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(u.timeoutSeconds()+30)*time.Second)
	defer cancel()
	req, err := u.request(ctx)
	if err != nil {
		return nil, 0, false, err
	}
	response, err := client.Do(req)
	if err != nil {
		return nil, 0, false, nil
	}
	defer response.Body.Close()
	body, readErr := io.ReadAll(response.Body)
	switch {
	case response.StatusCode == http.StatusOK && readErr == nil:
		var page updatesPage
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, 0, false, &ParseError{"the /updates answer is not a page: " + err.Error()}
		}
		return &page, 0, false, nil
	case response.StatusCode != http.StatusOK && response.StatusCode != http.StatusTooManyRequests && response.StatusCode < 500:
		return nil, 0, false, &UpdatesError{Status: response.StatusCode, Body: string(body)}
	}
	retryAfter, told = RetryAfter(response.Header.Get("Retry-After"), time.Now())
	return nil, retryAfter, told, nil
}

// fetch gets one page, after as many retries as transient failures need.
func (u *Updates) fetch(ctx context.Context) (*updatesPage, error) {
	client := u.Client
	if client == nil {
		client = http.DefaultClient
	}
	maxDelay := orDefault(u.MaxDelay, 30*time.Second)
	delay := orDefault(u.InitialDelay, time.Second)
	for {
		page, retryAfter, told, err := u.attempt(ctx, client)
		if page != nil || err != nil {
			return page, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		wait := delay
		if told {
			wait = retryAfter
		} else {
			delay = min(delay*2, maxDelay)
		}
		timer := time.NewTimer(min(wait, maxDelay))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

// Next waits for the next event and moves Offset past it.
func (u *Updates) Next(ctx context.Context) (*Event, error) {
	for len(u.page) == 0 {
		page, err := u.fetch(ctx)
		if err != nil {
			return nil, err
		}
		u.page = page.Items
		if len(page.Items) == 0 {
			u.Offset = max(u.Offset, page.NextOffset)
		}
	}
	event, err := ParseEvent(u.page[0])
	if err != nil {
		return nil, err
	}
	u.page = u.page[1:]
	if event.Offset == nil {
		return nil, &ParseError{"an /updates item without its offset"}
	}
	u.Offset = *event.Offset + 1
	return event, nil
}
