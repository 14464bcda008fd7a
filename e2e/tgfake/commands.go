package tgfake

import (
	"strings"
	"unicode/utf8"
)

// commandKey identifies one command list: Telegram stores commands per
// scope and language, and getMyCommands returns exactly the list of the
// given pair without falling back to broader scopes.
type commandKey struct {
	scope BotCommandScope
	lang  string
}

const (
	maxCommands          = 100
	maxCommandLength     = 32
	maxCommandDescLength = 256
)

// commandKeyLocked reads scope and language_code.
func (s *Server) commandKeyLocked(r *request) (commandKey, *APIError) {
	lang := r.str("language_code")
	if lang != "" && (len(lang) != 2 || lang[0] < 'a' || lang[0] > 'z' || lang[1] < 'a' || lang[1] > 'z') {
		return commandKey{}, badRequest("Invalid language code specified")
	}
	key := commandKey{scope: BotCommandScope{Type: "default"}, lang: lang}
	raw := r.str("scope")
	if raw == "" {
		return key, nil
	}
	fail := func(format string, args ...any) (commandKey, *APIError) {
		return commandKey{}, badRequest("Can't parse BotCommandScope: "+format, args...)
	}
	obj, apiErr := decodeObject(raw, "Can't parse BotCommandScope JSON object", "Can't parse BotCommandScope: BotCommandScope must be an Object")
	if apiErr != nil {
		return commandKey{}, apiErr
	}
	typ, err := obj.reqString("type")
	if err != nil {
		return fail("%s", err.Error())
	}
	key.scope.Type = typ
	switch typ {
	case "default", "all_private_chats", "all_group_chats", "all_chat_administrators":
		return key, nil
	case "chat", "chat_administrators", "chat_member":
	default:
		return fail("Unsupported type specified")
	}
	chatID, err := obj.reqString("chat_id")
	if err != nil {
		return fail("%s", err.Error())
	}
	if chatID == "" {
		return fail("Empty chat_id specified")
	}
	if typ == "chat_member" {
		userID, err := obj.reqInt("user_id")
		if err != nil {
			return fail("%s", err.Error())
		}
		if userID <= 0 {
			return fail("Invalid user_id specified")
		}
		key.scope.UserID = userID
	}
	ch, apiErr := s.chatLocked(chatID)
	if apiErr != nil {
		return commandKey{}, apiErr
	}
	key.scope.ChatID = ch.chat.ID
	return key, nil
}

func validCommand(c string) bool {
	for i := 0; i < len(c); i++ {
		b := c[i]
		if !(b >= 'a' && b <= 'z') && !(b >= '0' && b <= '9') && b != '_' {
			return false
		}
	}
	return true
}

func parseCommands(raw string) ([]BotCommand, *APIError) {
	if raw == "" {
		return nil, nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, badRequest("Can't parse commands JSON object")
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, badRequest("Expected an Array of BotCommand")
	}
	var out []BotCommand
	for _, item := range arr {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, badRequest("Can't parse BotCommand: expected an Object")
		}
		obj := jsonObject(m)
		cmd, err := obj.reqString("command")
		if err != nil {
			return nil, badRequest("Can't parse BotCommand: %s", err.Error())
		}
		desc, err := obj.reqString("description")
		if err != nil {
			return nil, badRequest("Can't parse BotCommand: %s", err.Error())
		}
		cmd = strings.TrimPrefix(strings.TrimSpace(cmd), "/")
		desc = strings.TrimSpace(desc)
		switch {
		case cmd == "":
			return nil, badRequest("Command must be non-empty")
		case utf8.RuneCountInString(cmd) > maxCommandLength:
			return nil, badRequest("Command length must not exceed %d", maxCommandLength)
		case desc == "":
			return nil, badRequest("Command description must be non-empty")
		case utf8.RuneCountInString(desc) > maxCommandDescLength:
			return nil, badRequest("Command description length must not exceed %d", maxCommandDescLength)
		case !validCommand(cmd):
			// Telegram's servers accept only lowercase letters, digits and
			// underscores.
			return nil, badRequest("BOT_COMMAND_INVALID")
		}
		out = append(out, BotCommand{Command: cmd, Description: desc})
	}
	if len(out) > maxCommands {
		return nil, badRequest("BOT_COMMANDS_TOO_MUCH")
	}
	return out, nil
}

// withCommandKey answers a command-list method with f of the list's key
// (the request's scope and language), under the server's lock.
func (s *Server) withCommandKey(r *request, f func(key commandKey) any) (any, *APIError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, apiErr := s.commandKeyLocked(r)
	if apiErr != nil {
		return nil, apiErr
	}
	return f(key), nil
}

func setMyCommands(s *Server, r *request) (any, *APIError) {
	cmds, apiErr := parseCommands(r.str("commands"))
	if apiErr != nil {
		return nil, apiErr
	}
	return s.withCommandKey(r, func(key commandKey) any {
		if len(cmds) == 0 {
			delete(s.commands, key)
		} else {
			s.commands[key] = cmds
		}
		s.hub.NotifyLocked()
		return true
	})
}

func getMyCommands(s *Server, r *request) (any, *APIError) {
	return s.withCommandKey(r, func(key commandKey) any {
		return append([]BotCommand{}, s.commands[key]...)
	})
}

func deleteMyCommands(s *Server, r *request) (any, *APIError) {
	return s.withCommandKey(r, func(key commandKey) any {
		delete(s.commands, key)
		s.hub.NotifyLocked()
		return true
	})
}
