package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acp-sidecar/acp-sidecar/intercept/wire"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/replay"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// outcome is what a restore achieved, in the agent's own words.
type outcome struct {
	// target is what the restore aimed at.
	target *state.Config
	// catalog is the config as the agent last reported it during the restore.
	catalog *state.Config
	applied []replay.Step
	failed  []replay.FieldError
	// optionsRaw is the full configOptions list of the last
	// set_config_option response, to pass on to the client unchanged.
	optionsRaw json.RawMessage
	// modeSet is true when the mode changed.
	modeSet bool
	// lost says the agent died under the restore: it stopped there, and
	// what it did applies to a native session that is gone.
	lost bool
}

// agentLost says whether a call failed because the agent died under it.
func agentLost(err error) bool { return errors.Is(err, proxy.ErrAgentGone) }

// restore moves a native session's config toward target, one step at a time
// as replay.Next decides, each after the previous answer, through the
// sidecar's own calls. It never stops at the first failure: every field that
// cannot be restored is named, so the user sees them all at once.
func (e *engine) restore(ctx context.Context, nativeID string, target, catalog *state.Config) outcome {
	out := outcome{catalog: cloneConfig(catalog), target: target}
	if out.catalog == nil {
		out.catalog = &state.Config{}
	}
	done := map[string]bool{}
	var silent error // the agent stopped answering: the rest is not tried
	for {
		step, fe, ok := replay.Next(target, out.catalog, done)
		if !ok {
			return out
		}
		done[step.Field] = true
		switch {
		case fe != nil:
			out.failed = append(out.failed, *fe)
			continue
		case step.Method == "":
			continue
		case silent != nil:
			out.failed = append(out.failed, replay.FieldError{Field: step.Field, Want: step.Value, Reason: "not tried: " + silent.Error()})
			continue
		}
		if err := e.runStep(ctx, nativeID, step, &out); err != nil {
			if agentLost(err) {
				// Nothing after this can land on the native session; the
				// rebuild starts again from its capture (rebuilding).
				out.lost = true
				return out
			}
			out.failed = append(out.failed, replay.FieldError{Field: step.Field, Want: step.Value, Reason: err.Error()})
			if errors.Is(err, context.DeadlineExceeded) {
				// One bound for the agent's silence, not one per field.
				silent = fmt.Errorf("the agent did not answer %s", step.Method)
			}
			continue
		}
		out.applied = append(out.applied, step)
	}
}

func (e *engine) runStep(ctx context.Context, nativeID string, step replay.Step, out *outcome) error {
	ctx, cancel := context.WithTimeout(ctx, e.callTimeout)
	defer cancel()
	switch step.Method {
	case replay.MethodSetConfigOption:
		params := map[string]any{"sessionId": nativeID, "configId": step.OptionID, "value": step.Value}
		if o := out.catalog.Option(step.OptionID); o != nil && o.Type == "boolean" {
			params["type"] = "boolean"
		}
		var res wire.ConfigPayload
		if err := e.sc.Call(ctx, step.Method, params, &res); err != nil {
			return err
		}
		if opts, ok := wire.ParseOptions(res.ConfigOptions); ok {
			out.catalog = withOptions(out.catalog, opts)
			out.optionsRaw = wire.CompactJSON(res.ConfigOptions)
		}
		if step.Field == replay.FieldMode {
			out.modeSet = true
			var id string
			if json.Unmarshal(step.Value, &id) == nil && out.catalog.Mode != nil {
				out.catalog.Mode.Current = id
			}
		}
	case replay.MethodSetMode:
		var id string
		if err := json.Unmarshal(step.Value, &id); err != nil {
			return fmt.Errorf("mode value %s: %w", step.Value, err)
		}
		if err := e.sc.Call(ctx, step.Method, map[string]any{"sessionId": nativeID, "modeId": id}, nil); err != nil {
			return err
		}
		out.catalog = withLegacy(out.catalog, "mode", id)
		out.modeSet = true
	case replay.MethodSetModel:
		var id string
		if err := json.Unmarshal(step.Value, &id); err != nil {
			return fmt.Errorf("model value %s: %w", step.Value, err)
		}
		if err := e.sc.Call(ctx, step.Method, map[string]any{"sessionId": nativeID, "modelId": id}, nil); err != nil {
			return err
		}
		out.catalog = withLegacy(out.catalog, "model", id)
	default:
		return fmt.Errorf("unknown step %s", step.Method)
	}
	return nil
}

// notifications tells the client what a restore changed, as the agent
// would have: the full option list the agent last returned, and the mode for
// clients that follow only the legacy modes (protocol.md §8, 14). Nothing is
// reported that the agent did not accept.
func (o outcome) notifications(clientID string) [][]byte {
	var lines [][]byte
	if o.optionsRaw != nil {
		lines = append(lines, wire.SessionUpdate(clientID, map[string]any{"sessionUpdate": "config_option_update", "configOptions": o.optionsRaw}))
	}
	if o.modeSet && o.catalog.Mode != nil && o.catalog.Mode.Current != "" {
		lines = append(lines, wire.SessionUpdate(clientID, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": o.catalog.Mode.Current}))
	}
	return lines
}
