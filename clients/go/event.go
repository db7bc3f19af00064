package supportplatform

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Event is one event envelope, as every webhook and /updates item carries it.
type Event struct {
	// ID is the same on every retry and for every subscription: drop duplicates by it.
	ID   string `json:"id"`
	Type string `json:"type"`
	// Timestamp is ISO 8601 with microseconds and an explicit UTC offset.
	Timestamp   string            `json:"timestamp"`
	WorkspaceID string            `json:"workspace_id"`
	Data        json.RawMessage   `json:"data"`
	Links       map[string]string `json:"_links"`
	// Offset is the position in /updates (items of the long poll only).
	Offset *int64 `json:"offset,omitempty"`
	// Typed is a pointer to the generated struct of a known type's data (*TicketCreatedData for
	// "ticket.created"), nil for a type newer than this package and for "webhook.test".
	Typed any `json:"-"`
}

// ParseError is a body that is not an event envelope, or whose data breaks its type's schema.
type ParseError struct{ Message string }

func (e *ParseError) Error() string { return e.Message }

var (
	envelopeSchema = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"id": map[string]any{"type": "string"}, "type": map[string]any{"type": "string"}, "timestamp": map[string]any{"type": "string"},
			"workspace_id": map[string]any{"type": "string"}, "data": map[string]any{"type": "object"}, "_links": map[string]any{"type": "object"},
		},
		"required": []any{"id", "type", "timestamp", "workspace_id", "data", "_links"},
	}
	dataSchemas = func() map[string]map[string]any {
		var schemas map[string]map[string]any
		if err := json.Unmarshal([]byte(eventSchemas), &schemas); err != nil {
			panic(fmt.Sprintf("supportplatform: the generated event schemas do not parse: %v", err))
		}
		return schemas
	}()
)

// ParseEvent parses the body bytes of a delivery (after verification), or an /updates item, into
// an Event; a known type's data must match its schema.
func ParseEvent(body []byte) (*Event, error) {
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		return nil, &ParseError{"the body is not JSON: " + err.Error()}
	}
	if found := mismatch(envelopeSchema, value, "$"); found != "" {
		return nil, &ParseError{"not an event envelope: " + found}
	}
	var event Event
	if err := json.Unmarshal(body, &event); err != nil {
		return nil, &ParseError{"not an event envelope: " + err.Error()}
	}
	if schema, known := dataSchemas[event.Type]; known {
		if found := mismatch(schema, value.(map[string]any)["data"], "$.data"); found != "" {
			return nil, &ParseError{event.Type + ": " + found}
		}
		event.Typed = newEventData(event.Type)
		if err := json.Unmarshal(event.Data, event.Typed); err != nil {
			return nil, &ParseError{event.Type + ": " + err.Error()}
		}
	}
	return &event, nil
}

// Receive verifies a delivery's Standard Webhooks headers (signature and timestamp) and parses its body.
func Receive(body []byte, headers http.Header, secrets []string, options StandardOptions) (*Event, error) {
	if err := VerifyStandard(body, headers, secrets, options); err != nil {
		return nil, err
	}
	return ParseEvent(body)
}
