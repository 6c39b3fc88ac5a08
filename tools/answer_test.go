package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/searchd/searchd/tools"
)

// The stored answer is what the agent runtime's Runner (module toolrun)
// writes and what the server's Inspector and Resolver read: its bytes are
// kept exactly (no HTML escaping of the output), and a decode gives back
// the result it was encoded from, its output in canonical form whatever
// key order jsonb stored it in.
func TestStoredAnswerRoundTrips(t *testing.T) {
	t.Parallel()
	res := tools.Result{OK: true, Outcome: tools.OutcomeOK, Output: json.RawMessage(`{"a":"<b>&","z":1}`),
		Message: "sent <now>", ResolvedBy: "ada@ops"}
	body, err := tools.EncodeAnswer(res)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"ok":true,"outcome":"ok","output":{"a":"<b>&","z":1},"message":"sent <now>","resolved_by":"ada@ops"}`
	if string(body) != want {
		t.Fatalf("EncodeAnswer = %s, want %s", body, want)
	}
	// jsonb's order: shorter keys first.
	stored := json.RawMessage(`{"ok": true, "output": {"z": 1, "a": "<b>&"}, "message": "sent <now>", "outcome": "ok", "resolved_by": "ada@ops"}`)
	got, err := tools.DecodeAnswer(stored, "email_message", "msg_1")
	if err != nil {
		t.Fatal(err)
	}
	res.ResourceType, res.ResourceID = "email_message", "msg_1"
	if got.OK != res.OK || got.Outcome != res.Outcome || string(got.Output) != string(res.Output) || got.Message != res.Message ||
		got.ResolvedBy != res.ResolvedBy || got.ResourceType != res.ResourceType || got.ResourceID != res.ResourceID || got.OutputOmitted {
		t.Fatalf("DecodeAnswer = %+v, want %+v", got, res)
	}
	if _, err := tools.DecodeAnswer(json.RawMessage(`"not an answer"`), "", ""); err == nil {
		t.Fatal("DecodeAnswer of a string answered no error")
	}
}
