package bot

import (
	"fmt"
	"strings"

	tele "gopkg.in/telebot.v3"

	"switchboard/locales"
)

// Role is who may use a command. Roles are ordered: an admin may use
// everything, everyone may use only RoleEveryone commands.
type Role int

const (
	// RoleEveryone is any user of the bot.
	RoleEveryone Role = iota
	// RoleAdmin is a user listed in ADMIN_IDS.
	RoleAdmin
)

// Command is one slash command. The same list drives routing, /help and
// Telegram's command menu, so the three cannot drift apart.
type Command struct {
	Name string
	// Desc is the locale key of the one-line description.
	Desc   string
	Role   Role
	Handle func(r *Request) error
}

func (b *Bot) command(cmd Command) tele.HandlerFunc {
	return func(c tele.Context) error {
		r := requestOf(c)
		if r == nil {
			return nil
		}
		if cmd.Role == RoleAdmin && !r.Admin {
			b.deps.Log.Warn("admin command refused", "user", r.User.ID, "command", cmd.Name)
			return r.Reply(r.T("error.admin_only"), nil)
		}
		return cmd.Handle(r)
	}
}

// visible returns the commands a user with these rights may use.
func (b *Bot) visible(admin bool) []Command {
	var out []Command
	for _, c := range b.commands {
		if c.Role == RoleEveryone || admin {
			out = append(out, c)
		}
	}
	return out
}

// helpText lists the commands of the user's roles, admins' in their own section.
func (b *Bot) helpText(lang string, admin bool) string {
	cat := b.deps.Catalog
	var sb strings.Builder
	sb.WriteString(cat.T(lang, "help.header"))
	section := RoleEveryone
	for _, c := range b.visible(admin) {
		if c.Role != section {
			section = c.Role
			sb.WriteString("\n\n" + cat.T(lang, "help.admin_header"))
		}
		sb.WriteString("\n" + cat.T(lang, "help.line", locales.Data{"Command": c.Name, "Description": cat.T(lang, c.Desc)}))
	}
	return sb.String()
}

func (b *Bot) menu(lang string, admin bool) []tele.Command {
	var out []tele.Command
	for _, c := range b.visible(admin) {
		out = append(out, tele.Command{Text: c.Name, Description: b.deps.Catalog.T(lang, c.Desc)})
	}
	return out
}

// menuLanguage is the language_code a menu is published under: the first
// language's menu is the default for every language without its own.
func menuLanguage(i int, lang string) string {
	if i == 0 {
		return ""
	}
	return lang
}

// publishCommands sets Telegram's default command menu in every language,
// and the admin menu in each admin's chat that already exists.
func (b *Bot) publishCommands() error {
	for i, lang := range locales.Languages {
		if err := b.tb.SetCommands(b.menu(lang, false), tele.CommandScope{Type: tele.CommandScopeDefault}, menuLanguage(i, lang)); err != nil {
			return fmt.Errorf("set default commands (%s): %w", lang, err)
		}
	}
	for id := range b.admins {
		if err := b.publishAdminMenu(id); err != nil {
			// An admin who never opened the bot has no chat yet; their first
			// update publishes it (see identify).
			b.deps.Log.Debug("admin menu deferred", "admin", id, "err", err)
		}
	}
	return nil
}

// publishAdminMenu sets the admin command list in one admin's private chat.
func (b *Bot) publishAdminMenu(id int64) error {
	for i, lang := range locales.Languages {
		scope := tele.CommandScope{Type: tele.CommandScopeChat, ChatID: id}
		if err := b.tb.SetCommands(b.menu(lang, true), scope, menuLanguage(i, lang)); err != nil {
			return fmt.Errorf("set admin commands for %d (%s): %w", id, lang, err)
		}
	}
	b.adminMenus.Store(id, true)
	return nil
}
