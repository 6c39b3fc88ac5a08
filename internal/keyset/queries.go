package keyset

// cursorKeyGet reads the cursor key migration 00022 generated: one row.
const cursorKeyGet = `SELECT secret FROM agent.cursor_key`
