// Poll your first update: prints every event of the workspace from the start of its history, then
// waits for new ones (Ctrl-C to stop).
//
//	API_URL=http://localhost:8080 API_KEY=sk_… go run .
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	supportplatform "support-platform/client"
)

func main() {
	url := os.Getenv("API_URL")
	if url == "" {
		url = "http://localhost:8080"
	}
	poll := &supportplatform.Updates{URL: url, APIKey: os.Getenv("API_KEY"), Offset: 0}
	for {
		event, err := poll.Next(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		if data, ok := event.Typed.(*supportplatform.MessageCreatedData); ok {
			fmt.Printf("  %s wrote: %s\n", data.SenderType, data.Content)
		}
		fmt.Println(*event.Offset, event.Type, event.ID)
		// poll.Offset is where to resume: store it to carry on after a restart.
	}
}
