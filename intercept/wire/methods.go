package wire

// The ACP methods the sidecar reads, answers or sends. Only these few
// frames are decoded; every other method passes by its peeked envelope.
const (
	Initialize      = "initialize"
	Authenticate    = "authenticate"
	SessionNew      = "session/new"
	SessionLoad     = "session/load"
	SessionResume   = "session/resume"
	SessionFork     = "session/fork"
	SessionList     = "session/list"
	SessionClose    = "session/close"
	SessionDelete   = "session/delete"
	SetMode         = "session/set_mode"
	SetConfigOption = "session/set_config_option"
	SetModel        = "session/set_model"
	Prompt          = "session/prompt"
	Cancel          = "session/cancel"
	Update          = "session/update"
)

// The sidecar's own extension methods. A client calls them; an agent
// never sees them.
const (
	// ExtPrefix starts every method the sidecar owns. Custom methods start
	// with an underscore, as the protocol requires.
	ExtPrefix          = "_sidecar/"
	ExtReset           = "_sidecar/reset"
	ExtRollback        = "_sidecar/rollback"
	ExtFork            = "_sidecar/fork"
	ExtRestoreOriginal = "_sidecar/restore_original"
	ExtAcceptConfig    = "_sidecar/accept_config"
	ExtStatus          = "_sidecar/status"
	// ExtAgent moves a session to another agent, for orchestrators that
	// do not drive config options: {sessionId, agent}.
	ExtAgent = "_sidecar/agent"
)
