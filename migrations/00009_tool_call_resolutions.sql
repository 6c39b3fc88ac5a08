-- A person's resolution of a tool call the journal recorded as uncertain:
-- a call to a vendor without idempotency support that ended without an
-- acknowledgement (a timeout, a reset, a 5xx after the request was sent).
-- Nothing retries such a call by itself, because a retry is a coin flip
-- between a duplicate and a delivery; a person looks at the evidence and
-- either marks it delivered (the claim's answer becomes a success, with the
-- actor) or authorizes one retry with the same key (the uncertain answer
-- leaves the journal, so the next attempt of the call makes it again). See
-- tools.Resolver.
--
-- Each row records who decided what, why, and the uncertain answer as it
-- stood, for as long as the Run the call belongs to is kept (396 days,
-- retain_until); the sweeper deletes it after. The claim it resolved is
-- named by its address and id but not referenced: a retry deletes it, and
-- the claim's own retention (30 days) is shorter.

-- +goose Up
CREATE TABLE agent.tool_call_resolutions (
    id               uuid        NOT NULL,
    organization_id  uuid        NOT NULL,
    scope            text        NOT NULL,
    key              text        NOT NULL,
    claim_id         uuid        NOT NULL,
    resolution       text        NOT NULL,
    actor            text        NOT NULL,
    reason           text        NOT NULL,
    uncertain_answer jsonb       NOT NULL,
    resolved_at      timestamptz NOT NULL,
    retain_until     timestamptz NOT NULL,

    CONSTRAINT tool_call_resolutions_pkey PRIMARY KEY (organization_id, id),
    CONSTRAINT tool_call_resolutions_resolution_check CHECK (resolution IN ('delivered', 'retry')),
    CONSTRAINT tool_call_resolutions_scope_check CHECK (scope LIKE 'tool.%'),
    CONSTRAINT tool_call_resolutions_key_check CHECK (key <> '' AND octet_length(key) <= 255),
    CONSTRAINT tool_call_resolutions_actor_check CHECK (actor <> '' AND char_length(actor) <= 255),
    CONSTRAINT tool_call_resolutions_reason_check CHECK (reason <> '' AND char_length(reason) <= 500),
    CONSTRAINT tool_call_resolutions_answer_object CHECK (jsonb_typeof(uncertain_answer) = 'object'),
    CONSTRAINT tool_call_resolutions_retention_check CHECK (retain_until > resolved_at)
);

-- The history of one call, newest last.
CREATE INDEX tool_call_resolutions_call_idx
    ON agent.tool_call_resolutions (organization_id, scope, key, resolved_at);
-- The sweeper reads expired resolutions oldest first.
CREATE INDEX tool_call_resolutions_retain_until_idx ON agent.tool_call_resolutions (retain_until);

-- +goose Down
DROP TABLE agent.tool_call_resolutions;
