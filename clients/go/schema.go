package supportplatform

import (
	"fmt"
	"math"
	"strings"
)

// mismatch is where value (as encoding/json decodes into any) first fails schema, or "" when it
// conforms: a JSON Schema check of the dialect the server's event schemas use (type, properties,
// required, enum, anyOf, items).
func mismatch(schema map[string]any, value any, at string) string {
	if anyOf, ok := schema["anyOf"].([]any); ok {
		matched := false
		for _, alternative := range anyOf {
			if s, ok := alternative.(map[string]any); ok && mismatch(s, value, at) == "" {
				matched = true
				break
			}
		}
		if !matched {
			return fmt.Sprintf("%s: matches none of its %d alternatives", at, len(anyOf))
		}
	}
	if expected, ok := schema["type"].(string); ok && !typeMatches(expected, value) {
		return fmt.Sprintf("%s: not of type %s", at, expected)
	}
	if allowed, ok := schema["enum"].([]any); ok {
		found := false
		for _, a := range allowed {
			if a == value {
				found = true
			}
		}
		if !found {
			names := make([]string, len(allowed))
			for i, a := range allowed {
				names[i] = fmt.Sprint(a)
			}
			return fmt.Sprintf("%s: not one of %s", at, strings.Join(names, ", "))
		}
	}
	if items, ok := value.([]any); ok {
		if itemSchema, ok := schema["items"].(map[string]any); ok {
			for i, item := range items {
				if found := mismatch(itemSchema, item, fmt.Sprintf("%s[%d]", at, i)); found != "" {
					return found
				}
			}
		}
	}
	if record, ok := value.(map[string]any); ok {
		required, _ := schema["required"].([]any)
		for _, name := range required {
			if _, present := record[name.(string)]; !present {
				return fmt.Sprintf("%s.%s: missing", at, name)
			}
		}
		properties, _ := schema["properties"].(map[string]any)
		// In the schema's order is not needed: any mismatch refuses, and the first found is reported.
		for name, sub := range properties {
			if field, present := record[name]; present {
				if found := mismatch(sub.(map[string]any), field, at+"."+name); found != "" {
					return found
				}
			}
		}
	}
	return ""
}

func typeMatches(expected string, value any) bool {
	switch expected {
	case "string":
		_, ok := value.(string)
		return ok
	case "number":
		_, ok := value.(float64)
		return ok
	case "integer":
		n, ok := value.(float64)
		return ok && n == math.Trunc(n)
	case "boolean":
		_, ok := value.(bool)
		return ok
	case "null":
		return value == nil
	case "array":
		_, ok := value.([]any)
		return ok
	case "object":
		_, ok := value.(map[string]any)
		return ok
	}
	return true
}
