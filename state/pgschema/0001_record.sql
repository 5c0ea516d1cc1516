-- The record of a fleet (docs/fleet.md): every session with its lease, its
-- turns, the native ids that map to it, the tombstones of deleted sessions,
-- and what each named agent said about itself. Records are json (not
-- jsonb): the agent's raw JSON is kept byte for byte.

CREATE TABLE acp_sidecar.sessions (
	client_id     text PRIMARY KEY,
	-- The Session without its original. NULL while only turns were written.
	record        json,
	-- Written once; a different one is refused (ErrOriginalExists).
	original      json,
	closed        boolean NOT NULL DEFAULT false,
	updated       timestamptz,
	-- Kept by every turn write, for a listing that reads no turns.
	turns_kept    integer NOT NULL DEFAULT 0,
	last_activity timestamptz,
	-- The lease: who writes the session, at which epoch, until when (the
	-- database's clock). Every write checks the epoch under the row's lock.
	lease_instance text,
	lease_host     text,
	lease_pid      integer,
	lease_epoch    bigint NOT NULL DEFAULT 0,
	lease_expires  timestamptz
);

CREATE TABLE acp_sidecar.turns (
	client_id text NOT NULL REFERENCES acp_sidecar.sessions ON DELETE CASCADE,
	idx       integer NOT NULL,
	-- The turn's status, over the one in record: a rollback changes only it.
	status    text NOT NULL,
	record    json NOT NULL,
	PRIMARY KEY (client_id, idx)
);

CREATE TABLE acp_sidecar.native_ids (
	native_id text PRIMARY KEY,
	client_id text NOT NULL REFERENCES acp_sidecar.sessions ON DELETE CASCADE
);
CREATE INDEX native_ids_by_client ON acp_sidecar.native_ids (client_id);

-- A deleted session's id and nothing else: a write for it is refused.
CREATE TABLE acp_sidecar.deleted_sessions (
	client_id text PRIMARY KEY,
	deleted   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE acp_sidecar.agents (
	name   text PRIMARY KEY,
	record json NOT NULL
);
