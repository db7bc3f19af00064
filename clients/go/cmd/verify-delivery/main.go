// Command verify-delivery checks a saved delivery: it reads {"secrets": [...], "body_base64": "...",
// "headers": {...}} (the shape of the shared test vectors; "now" in Unix seconds is optional) on
// stdin, prints what each scheme says and the parsed event as JSON, and exits 0 only when both
// signatures verify and the body parses.
//
//	go run ./cmd/verify-delivery < delivery.json
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"time"

	supportplatform "support-platform/client"
)

type delivery struct {
	Secrets    []string          `json:"secrets"`
	BodyBase64 []byte            `json:"body_base64"`
	Headers    map[string]string `json:"headers"`
	Now        int64             `json:"now"`
}

func outcome(err error) string {
	var refused *supportplatform.VerificationError
	if errors.As(err, &refused) {
		return refused.Reason
	}
	if err != nil {
		return err.Error()
	}
	return "valid"
}

func main() {
	var d delivery
	if err := json.NewDecoder(os.Stdin).Decode(&d); err != nil {
		fmt.Fprintln(os.Stderr, "verify-delivery: stdin is not a delivery:", err)
		os.Exit(2)
	}
	headers := http.Header{}
	for name, value := range d.Headers {
		headers.Set(name, value)
	}
	options := supportplatform.StandardOptions{}
	if d.Now != 0 {
		options.Now = time.Unix(d.Now, 0)
	}
	result := map[string]any{
		"x_webhook_signature": outcome(supportplatform.VerifySignature(d.BodyBase64, headers.Get("X-Webhook-Signature"), d.Secrets...)),
		"standard_webhooks":   outcome(supportplatform.VerifyStandard(d.BodyBase64, headers, d.Secrets, options)),
	}
	event, err := supportplatform.ParseEvent(d.BodyBase64)
	if err != nil {
		result["event"] = map[string]any{"error": err.Error()}
	} else {
		typed := "map"
		if event.Typed != nil {
			typed = reflect.TypeOf(event.Typed).Elem().Name()
		}
		result["event"] = map[string]any{"id": event.ID, "type": event.Type, "typed": typed}
	}
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
	if result["x_webhook_signature"] != "valid" || result["standard_webhooks"] != "valid" || err != nil {
		os.Exit(1)
	}
}
