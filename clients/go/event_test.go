package supportplatform

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"
)

func withData(t *testing.T, body []byte, change func(data map[string]any)) []byte {
	t.Helper()
	var envelope map[string]any
	if err := json.Unmarshal(body, &envelope); err != nil {
		t.Fatal(err)
	}
	change(envelope["data"].(map[string]any))
	out, _ := json.Marshal(envelope)
	return out
}

func TestAVerifiedDeliveryParsesIntoItsStruct(t *testing.T) {
	v, body, headers := findVector(t, "standard-webhooks", "good signature")
	event, err := Receive(body, headers, v.Secrets, StandardOptions{Now: time.Unix(v.Now, 0)})
	if err != nil {
		t.Fatal(err)
	}
	data, ok := event.Typed.(*TicketCreatedData)
	if !ok || event.Type != "ticket.created" {
		t.Fatalf("typed as %T", event.Typed)
	}
	if data.Status != "new" || data.Subject == nil || *data.Subject != "Printer on fire" {
		t.Fatalf("data %+v", data)
	}
	if event.Links["ticket"] == "" {
		t.Fatalf("links %v", event.Links)
	}
}

func TestADeliveryThatFailsVerificationIsNotParsed(t *testing.T) {
	v, body, headers := findVector(t, "standard-webhooks", "good signature")
	tampered := withData(t, body, func(d map[string]any) { d["subject"] = "x" })
	if _, err := Receive(tampered, headers, v.Secrets, StandardOptions{Now: time.Unix(v.Now, 0)}); err == nil {
		t.Fatal("a tampered body was accepted")
	}
}

func TestNestedObjectsBecomeTheirStructs(t *testing.T) {
	body := []byte(`{"id":"e1","type":"message.created","timestamp":"t","workspace_id":"w","_links":{},"data":{"id":"m1","message_id":"m1",
		"ticket_id":"t1","sender_type":"contact","sender_id":null,"sender_name":null,"content":"hi","is_internal":false,
		"created_at":"2026-01-01T00:00:00","media":[{"url":"/api/v1/media/f1","size":3}]}}`)
	event, err := ParseEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	data := event.Typed.(*MessageCreatedData)
	if len(data.Media) != 1 || data.Media[0].URL != "/api/v1/media/f1" || *data.Media[0].Size != 3 || data.Media[0].FileName != nil || data.SenderID != nil {
		t.Fatalf("data %+v", data)
	}
}

func TestDataThatBreaksItsSchemaIsRefusedNamingTheField(t *testing.T) {
	_, body, _ := findVector(t, "standard-webhooks", "good signature")
	cases := map[string]func(map[string]any){
		`\$\.data\.status: not one of`:      func(d map[string]any) { d["status"] = "lost" },
		`\$\.data\.subject: matches none`:   func(d map[string]any) { d["subject"] = 7 },
		`\$\.data\.ticket_id: missing`:      func(d map[string]any) { delete(d, "ticket_id") },
		`\$\.data\.priority: not of type s`: func(d map[string]any) { d["priority"] = true },
	}
	for want, change := range cases {
		_, err := ParseEvent(withData(t, body, change))
		var parseErr *ParseError
		if !errors.As(err, &parseErr) || !regexp.MustCompile(want).MatchString(err.Error()) {
			t.Errorf("want %s, got %v", want, err)
		}
	}
}

func TestAnEnvelopeWithoutItsFieldsOrABodyThatIsNotJSONIsRefused(t *testing.T) {
	for body, want := range map[string]string{`{"type":"ticket.created"}`: `\$\.id: missing`, `{"id":`: `not JSON`, ``: `not JSON`} {
		if _, err := ParseEvent([]byte(body)); err == nil || !regexp.MustCompile(want).MatchString(err.Error()) {
			t.Errorf("%q: want %s, got %v", body, want, err)
		}
	}
}

func TestATypeThisPackageDoesNotKnowKeepsItsRawData(t *testing.T) {
	event, err := ParseEvent([]byte(`{"id":"e1","type":"webhook.test","timestamp":"t","workspace_id":"w","_links":{},"data":{"anything":[1]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if event.Typed != nil || string(event.Data) != `{"anything":[1]}` {
		t.Fatalf("event %+v", event)
	}
	if !slices.Contains(EventTypes, "ticket.created") || slices.Contains(EventTypes, "webhook.test") {
		t.Fatalf("catalogue %v", EventTypes)
	}
}
