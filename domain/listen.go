package domain

import "context"

// Listen runs a LISTEN on channel until ctx ends, on a connection of its
// own, calling onConnect after every (re)connect and onNotify for each
// payload. storage.Store.Listen does this, adapted by main; the workflows
// whose replicas wake each other (dispatch, memory) take one in Run.
type Listen func(ctx context.Context, channel string, onConnect func(), onNotify func(payload string))
