package supportplatform

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

type vector struct {
	Name       string            `json:"name"`
	Scheme     string            `json:"scheme"`
	Secrets    []string          `json:"secrets"`
	BodyBase64 string            `json:"body_base64"`
	Headers    map[string]string `json:"headers"`
	Now        int64             `json:"now"`
	Valid      bool              `json:"valid"`
	Error      string            `json:"error"`
}

type vectorFile struct {
	ToleranceSeconds int64    `json:"tolerance_seconds"`
	Vectors          []vector `json:"vectors"`
}

// loadVectors reads the shared vectors (clients/test-vectors.json), made with the server's signing code.
func loadVectors(t *testing.T) vectorFile {
	t.Helper()
	raw, err := os.ReadFile("../test-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file vectorFile
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	return file
}

func findVector(t *testing.T, scheme, name string) (vector, []byte, http.Header) {
	t.Helper()
	for _, v := range loadVectors(t).Vectors {
		if v.Scheme == scheme && v.Name == name {
			body, _ := base64.StdEncoding.DecodeString(v.BodyBase64)
			headers := http.Header{}
			for k, value := range v.Headers {
				headers.Set(k, value)
			}
			return v, body, headers
		}
	}
	t.Fatalf("no vector %s: %s", scheme, name)
	return vector{}, nil, nil
}

func TestVectorsHoldValidAndInvalidCasesOfBothSchemes(t *testing.T) {
	for _, scheme := range []string{"x-webhook-signature", "standard-webhooks"} {
		seen := map[bool]bool{}
		for _, v := range loadVectors(t).Vectors {
			if v.Scheme == scheme {
				seen[v.Valid] = true
			}
		}
		if !seen[true] || !seen[false] {
			t.Errorf("%s: vectors lack a valid or an invalid case", scheme)
		}
	}
}

func TestVectors(t *testing.T) {
	file := loadVectors(t)
	for _, v := range file.Vectors {
		t.Run(v.Scheme+": "+v.Name, func(t *testing.T) {
			body, err := base64.StdEncoding.DecodeString(v.BodyBase64)
			if err != nil {
				t.Fatal(err)
			}
			headers := http.Header{}
			for k, value := range v.Headers {
				headers.Set(k, value)
			}
			if v.Scheme == "x-webhook-signature" {
				err = VerifySignature(body, headers.Get("X-Webhook-Signature"), v.Secrets...)
			} else {
				err = VerifyStandard(body, headers, v.Secrets, StandardOptions{Now: time.Unix(v.Now, 0), Tolerance: time.Duration(file.ToleranceSeconds) * time.Second})
			}
			if v.Valid {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var refused *VerificationError
			if !errors.As(err, &refused) || refused.Reason != v.Error {
				t.Fatalf("want refused (%s), got %v", v.Error, err)
			}
		})
	}
}

func TestDefaultToleranceIsFiveMinutesAgainstTheSystemClock(t *testing.T) {
	v, body, headers := findVector(t, "standard-webhooks", "good signature")
	if err := VerifyStandard(body, headers, v.Secrets, StandardOptions{Now: time.Unix(v.Now+300, 0)}); err != nil {
		t.Fatalf("at the tolerance: %v", err)
	}
	err := VerifyStandard(body, headers, v.Secrets, StandardOptions{Now: time.Unix(v.Now+301, 0)})
	if err == nil || !strings.Contains(err.Error(), "300 s") {
		t.Fatalf("past the tolerance: %v", err)
	}
	// The vectors' clock is in the past: the system clock refuses them.
	var refused *VerificationError
	if err := VerifyStandard(body, headers, v.Secrets, StandardOptions{}); !errors.As(err, &refused) || refused.Reason != ReasonTimestamp {
		t.Fatalf("with the system clock: %v", err)
	}
}
