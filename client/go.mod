module github.com/searchd/searchd/client

go 1.26.0

require (
	github.com/google/uuid v1.6.0
	github.com/standard-webhooks/standard-webhooks/libraries v0.0.1
)
