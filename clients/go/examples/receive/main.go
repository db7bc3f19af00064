// Receive your first webhook: verifies each delivery, prints its event, answers 204 (401 when forged).
//
//	WEBHOOK_SECRET=whsec_… PORT=3000 go run .
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"

	supportplatform "support-platform/client"
)

func main() {
	secret := os.Getenv("WEBHOOK_SECRET") // the secret POST /api/v1/webhooks answered
	port := os.Getenv("PORT")
	if port == "" {
		port = "3000"
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// The bytes as received, before any JSON parsing: a re-serialised body has another signature.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		event, err := supportplatform.Receive(body, r.Header, []string{secret}, supportplatform.StandardOptions{})
		if err != nil {
			fmt.Println("refused:", err)
			var forged *supportplatform.VerificationError
			if errors.As(err, &forged) {
				w.WriteHeader(http.StatusUnauthorized)
			} else {
				w.WriteHeader(http.StatusBadRequest)
			}
			return
		}
		if data, ok := event.Typed.(*supportplatform.TicketCreatedData); ok {
			subject := "(no subject)"
			if data.Subject != nil {
				subject = *data.Subject
			}
			fmt.Printf("new ticket %s: %s\n", data.TicketID, subject)
		}
		fmt.Println(event.Type, event.ID)
		w.WriteHeader(http.StatusNoContent)
	})
	listener, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on http://%s\n", listener.Addr())
	log.Fatal(http.Serve(listener, nil))
}
