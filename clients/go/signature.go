// Package supportplatform verifies the support platform's webhooks, parses them into typed events
// and long-polls /api/v1/updates, with the standard library only.
//
// Verification works on the body bytes exactly as received (before any JSON parsing: a
// re-serialised body has another signature), for both schemes the server signs every delivery with:
//   - X-Webhook-Signature: "sha256=<hex HMAC-SHA256 of the body>", keyed with the secret string as written;
//   - Standard Webhooks: webhook-signature holds space-separated "v1,<base64 HMAC-SHA256 of
//     "<webhook-id>.<webhook-timestamp>.<body>">", keyed with the base64 decoding of the secret after
//     "whsec_"; several during a secret rotation, any valid one passes, other versions are ignored.
//
// Digests are compared in constant time (hmac.Equal).
package supportplatform

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Why a delivery was refused.
const (
	ReasonHeaders   = "headers"   // a header is missing or malformed
	ReasonSignature = "signature" // no signature matches any secret
	ReasonTimestamp = "timestamp" // the timestamp is outside the tolerance
)

// DefaultTolerance is how far webhook-timestamp may lie from now, in the past or the future.
const DefaultTolerance = 5 * time.Minute

// VerificationError is a delivery that must not be trusted; Reason is one of the Reason constants.
type VerificationError struct {
	Reason  string
	Message string
}

func (e *VerificationError) Error() string { return e.Message }

func refuse(reason, format string, args ...any) error {
	return &VerificationError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

var (
	contractHeader = regexp.MustCompile(`^sha256=([0-9a-fA-F]{64})$`)
	base64Value    = regexp.MustCompile(`^[A-Za-z0-9+/]+={0,2}$`)
	integer        = regexp.MustCompile(`^[0-9]+$`)
)

func digest(key, message []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write(message)
	return mac.Sum(nil)
}

// VerifySignature checks X-Webhook-Signature against the body with any of the secrets (the previous
// one too, during a rotation).
func VerifySignature(body []byte, signature string, secrets ...string) error {
	if strings.TrimSpace(signature) == "" {
		return refuse(ReasonHeaders, "X-Webhook-Signature is missing")
	}
	match := contractHeader.FindStringSubmatch(strings.TrimSpace(signature))
	if match == nil {
		return refuse(ReasonSignature, "X-Webhook-Signature is not sha256=<64 hex digits>")
	}
	sent, _ := hex.DecodeString(match[1])
	for _, secret := range secrets {
		if hmac.Equal(sent, digest([]byte(secret), body)) {
			return nil
		}
	}
	return refuse(ReasonSignature, "X-Webhook-Signature matches none of the secrets")
}

// StandardKey is the Standard Webhooks key of a secret: the base64 (or, for older secrets,
// base64url) after "whsec_".
func StandardKey(secret string) ([]byte, error) {
	encoded := strings.TrimRight(strings.TrimPrefix(secret, "whsec_"), "=")
	encoded = strings.NewReplacer("-", "+", "_", "/").Replace(encoded)
	return base64.RawStdEncoding.DecodeString(encoded)
}

// StandardOptions tune VerifyStandard; the zero value means DefaultTolerance and the system clock.
type StandardOptions struct {
	Tolerance time.Duration
	Now       time.Time
}

// VerifyStandard checks the Standard Webhooks headers against the body with any of the secrets.
func VerifyStandard(body []byte, headers http.Header, secrets []string, options StandardOptions) error {
	id, timestamp, signatures := headers.Get("webhook-id"), headers.Get("webhook-timestamp"), headers.Get("webhook-signature")
	if id == "" || timestamp == "" || signatures == "" {
		return refuse(ReasonHeaders, "webhook-id, webhook-timestamp and webhook-signature are all needed")
	}
	if !integer.MatchString(timestamp) {
		return refuse(ReasonHeaders, "webhook-timestamp is not an integer")
	}
	sentAt, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return refuse(ReasonHeaders, "webhook-timestamp is out of range")
	}
	tolerance, now := options.Tolerance, options.Now
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	if now.IsZero() {
		now = time.Now()
	}
	if skew := now.Unix() - sentAt; skew > int64(tolerance/time.Second) || -skew > int64(tolerance/time.Second) {
		return refuse(ReasonTimestamp, "webhook-timestamp is more than %d s from now", int64(tolerance/time.Second))
	}
	var sent [][]byte
	for _, part := range strings.Split(signatures, " ") {
		value, ok := strings.CutPrefix(part, "v1,")
		if !ok || !base64Value.MatchString(value) {
			continue
		}
		if decoded, err := base64.StdEncoding.DecodeString(value); err == nil {
			sent = append(sent, decoded)
		}
	}
	signed := append([]byte(id+"."+timestamp+"."), body...)
	for _, secret := range secrets {
		key, err := StandardKey(secret)
		if err != nil {
			continue
		}
		expected := digest(key, signed)
		for _, signature := range sent {
			if hmac.Equal(expected, signature) {
				return nil
			}
		}
	}
	return refuse(ReasonSignature, "no v1 signature in webhook-signature matches the secrets")
}
