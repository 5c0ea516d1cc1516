package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/acp-sidecar/acp-sidecar/remote"
)

func connectCommand(s stdio) *cli.Command {
	return &cli.Command{
		Name:      "connect",
		Usage:     "bridge an editor's stdio to `acp-sidecar serve` over the network, across drops (docs/remote.md)",
		UsageText: "acp-sidecar connect [flags] URL [URL...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "token-file", EnvVars: envs("TOKEN_FILE"), Usage: "read the server's bearer token from `FILE` (else $ACP_SIDECAR_TOKEN)"},
			&cli.DurationFlag{Name: "hold-timeout", EnvVars: envs("HOLD_TIMEOUT"), Value: remote.DefaultHoldTimeout, Usage: "how long the editor's requests wait while no server can be reached, before each gets an error"},
			&cli.IntFlag{Name: "max-message", EnvVars: envs("MAX_MESSAGE"), Value: remote.DefaultMaxMessage, Usage: "largest message in bytes either way"},
			&cli.DurationFlag{Name: "heartbeat", EnvVars: envs("HEARTBEAT"), Value: remote.DefaultHeartbeat, Usage: "ping the server this often; a connection whose pong takes longer is dropped and resumed"},
			&cli.StringFlag{Name: "log-file", EnvVars: envs("LOG_FILE"), Usage: "write the bridge's log here (default: sidecar.log in the state dir)"},
			&cli.StringFlag{Name: "log-level", EnvVars: envs("LOG_LEVEL"), Value: "info", Usage: "debug, info, warn or error"},
			&cli.StringFlag{Name: "state-dir", EnvVars: envs("STATE_DIR"), Usage: "where the log is kept (default $XDG_STATE_HOME/acp-sidecar)"},
		},
		Action: func(c *cli.Context) error {
			urls := c.Args().Slice()
			if len(urls) == 0 {
				return &exitError{code: 2, err: errors.New("connect: give the server's URL (acp-sidecar connect http://127.0.0.1:7777)")}
			}
			for _, u := range urls {
				if !strings.Contains(u, "://") {
					return &exitError{code: 2, err: fmt.Errorf("connect: %q is not a URL (http://, https://, ws:// or wss://)", u)}
				}
			}
			token, err := tokenFrom(c.String("token-file"))
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if token == "" {
				return &exitError{code: 2, err: errors.New("connect: the server's token is needed: --token-file FILE or $ACP_SIDECAR_TOKEN")}
			}
			o := runOptions{logFile: c.String("log-file"), logLevel: c.String("log-level"), stateDir: c.String("state-dir")}
			if o.stateDir == "" {
				o.stateDir = defaultStateDir()
			}
			log, closeLog, err := openLog(o)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			defer closeLog()
			err = remote.Bridge(c.Context, remote.BridgeConfig{
				URLs: urls, Token: token, MaxMessage: c.Int("max-message"), HoldTimeout: c.Duration("hold-timeout"), Heartbeat: c.Duration("heartbeat"),
				Log: log.With("connect", strings.Join(urls, " ")),
			}, pollable(s.in), s.out)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			return nil
		},
	}
}

// tokenFrom reads a bearer token from file, else from $ACP_SIDECAR_TOKEN;
// "" when neither has one.
func tokenFrom(file string) (string, error) {
	if file == "" {
		return os.Getenv("ACP_SIDECAR_TOKEN"), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("--token-file %s is empty", file)
	}
	return t, nil
}
