package bot

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	tele "gopkg.in/telebot.v3"

	"switchboard/bot/delivery"
	"switchboard/domain/dispatch"
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

// Place is a set of chats a command may run in. Groups other than the admin
// chat are never one: what the bot says there everybody reads, so a
// command of ours sent there gets only a pointer to the private chat.
type Place int

const (
	// InPrivate is the user's private chat with the bot.
	InPrivate Place = 1 << iota
	// InAdminChat is the admin chat (ADMIN_CHAT_ID), where admins work
	// together on analysis runs and orders.
	InAdminChat
)

// Section is the header a command is listed under in /help.
type Section int

// The sections in /help's order. SectionMaster is shown to registered
// masters only; the admin sections to admins only.
const (
	SectionGeneral Section = iota
	SectionJobs
	SectionMemory
	SectionMaster
	SectionAdminOrders
	SectionAdminRuns
	SectionAdminSystem
	sectionCount
)

// sectionHeaders are the locale keys of the sections' headers.
var sectionHeaders = [sectionCount]string{
	SectionGeneral:     "help.section_general",
	SectionJobs:        "help.section_jobs",
	SectionMemory:      "help.section_memory",
	SectionMaster:      "help.section_master",
	SectionAdminOrders: "help.section_admin_orders",
	SectionAdminRuns:   "help.section_admin_runs",
	SectionAdminSystem: "help.section_admin_system",
}

// Command is one slash command. The same list drives routing, /help and
// Telegram's command menus, so the three cannot drift apart.
type Command struct {
	Name string
	// Desc is the locale key of the one-line description.
	Desc string
	Role Role
	// Where is where the command runs. Zero: an everyone command runs in
	// private chats only (what it answers may be private), an admin
	// command in private chats and in the admin chat.
	Where Place
	// Section is its header in /help.
	Section Section
	// Listed, when set, says whether /help lists it for r: a command
	// only some users need (a GitHub login, where no task goes to GitHub,
	// is nobody's business) stays out of everyone's list. It runs anyway.
	Listed func(r *Request) bool
	Handle func(r *Request) error
}

func (c Command) where() Place {
	switch {
	case c.Where != 0:
		return c.Where
	case c.Role == RoleAdmin:
		return InPrivate | InAdminChat
	default:
		return InPrivate
	}
}

func (b *Bot) command(cmd Command) tele.HandlerFunc {
	return func(c tele.Context) error {
		r := requestOf(c)
		if r == nil {
			return nil
		}
		return b.run(r, cmd)
	}
}

// run checks that the command may run in this chat and for this user, and
// runs it.
func (b *Bot) run(r *Request, cmd Command) error {
	if cmd.where()&b.placeOf(r.Chat()) == 0 {
		return b.elsewhere(r, cmd)
	}
	if cmd.Role == RoleAdmin && !r.Admin {
		b.deps.Log.Warn("admin command refused", "user", r.User.ID, "command", cmd.Name)
		return r.ReplyToAsker(r.T("error.admin_only"))
	}
	r.inSection(cmd.Section)
	return cmd.Handle(r)
}

// placeOf is the Place a chat belongs to; 0 for any other group.
func (b *Bot) placeOf(chat *tele.Chat) Place {
	switch {
	case chat == nil:
		return 0
	case chat.Type == tele.ChatPrivate:
		return InPrivate
	case b.inAdminChat(chat):
		return InAdminChat
	default:
		return 0
	}
}

// inAdminChat reports whether chat is ADMIN_CHAT_ID's.
func (b *Bot) inAdminChat(chat *tele.Chat) bool {
	return chat != nil && b.cfg.AdminChatID != 0 && chat.ID == b.cfg.AdminChatID
}

// chatLang is the language of what the bot writes in chat to a user who
// reads lang: everyone in the admin chat reads the one its boards and
// events are written in (ADMIN_CHAT_LANGUAGE), whoever typed the command.
func (b *Bot) chatLang(chat *tele.Chat, lang string) string {
	if b.inAdminChat(chat) && b.cfg.AdminLang != "" {
		return b.cfg.AdminLang
	}
	return lang
}

// elsewhere answers a command sent where it does not run. In a group the
// answer names the command and links to the private chat (a deep link
// that runs it there), and never carries anything of the user's; an
// admin command from someone who is not an admin is left unanswered there,
// as a command meant for another bot would be.
func (b *Bot) elsewhere(r *Request, cmd Command) error {
	if r.Chat().Type == tele.ChatPrivate {
		return r.Reply(r.T("error.admin_chat_only", locales.Data{"Command": "/" + cmd.Name}), nil)
	}
	if cmd.Role == RoleAdmin && !r.Admin {
		b.deps.Log.Debug("admin command in a group ignored", "user", r.User.ID, "command", cmd.Name)
		return nil
	}
	var kb *tele.ReplyMarkup
	if b.tb.Me != nil && b.tb.Me.Username != "" {
		payload := cmd.Name
		if payload == "start" {
			payload = ""
		}
		kb = &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{
			{Text: r.T("chat.open_private"), URL: deepLink(b.tb.Me.Username, payload)},
		}}}
	}
	replyTo := 0
	if m := r.Message(); m != nil {
		replyTo = m.ID
	}
	key := "chat.private_only"
	if cmd.where()&InAdminChat != 0 && b.cfg.AdminChatID != 0 {
		key = "chat.private_or_admin"
	}
	// Only the member who typed it needs the pointer: where Telegram lets
	// the bot (an administrator of the group), nobody else sees it.
	return b.queueReplyFor(r.Ctx, r.Chat().ID, r.User.ID, replyTo, r.T(key, locales.Data{"Command": "/" + cmd.Name}), kb)
}

// deepLink opens the private chat with the bot; a payload arrives as
// "/start <payload>" (Telegram allows [A-Za-z0-9_-], up to 64 characters).
func deepLink(username, payload string) string {
	link := "https://t.me/" + url.PathEscape(username)
	if payload != "" {
		link += "?start=" + url.QueryEscape(payload)
	}
	return link
}

// Masters tells whether a user is a registered master: /start and /help
// show masters their commands and others how to become one.
type Masters interface {
	IsMaster(ctx context.Context, userID int64) (bool, error)
}

// dispatchMasters asks the dispatch workflow, which keeps the masters.
type dispatchMasters struct{ d Dispatch }

func (m dispatchMasters) IsMaster(ctx context.Context, userID int64) (bool, error) {
	_, _, err := m.d.Master(ctx, userID)
	if errors.Is(err, dispatch.ErrNotMaster) {
		return false, nil
	}
	return err == nil, err
}

// isMaster reports whether the request's user is a registered master; a
// failed look-up counts as no (it only decides what /start and /help show).
func (b *Bot) isMaster(r *Request) bool {
	if b.masters == nil {
		return false
	}
	ok, err := b.masters.IsMaster(r.Ctx, r.User.ID)
	if err != nil {
		b.deps.Log.Warn("is master", "user", r.User.ID, "err", err)
		return false
	}
	return ok
}

// lookup finds a registered command by name.
func (b *Bot) lookup(name string) (Command, bool) {
	for _, c := range b.commands {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

// helpText lists, under their sections' headers, the commands of the roles
// the user has: everyone's, a master's to masters (others get one line on
// how to become one), admins' to admins.
func (b *Bot) helpText(r *Request) string {
	var sections [sectionCount][]Command
	for _, c := range b.commands {
		if c.where()&InPrivate == 0 || (c.Role == RoleAdmin && !r.Admin) || c.Listed != nil && !c.Listed(r) {
			continue
		}
		sections[c.Section] = append(sections[c.Section], c)
	}
	master := b.isMaster(r)
	order := make([]Section, 0, sectionCount)
	for s := range sectionCount {
		order = append(order, s)
	}
	if master {
		// A master opens /help for their own few commands: they come
		// right after the general ones, not below the job seeker's ten.
		order = slices.DeleteFunc(order, func(s Section) bool { return s == SectionMaster })
		order = slices.Insert(order, int(SectionGeneral)+1, SectionMaster)
	}
	var sb strings.Builder
	sb.WriteString(r.T("help.header"))
	for _, s := range order {
		cmds := sections[s]
		if len(cmds) == 0 {
			continue
		}
		if s == SectionMaster && !master {
			sb.WriteString("\n\n" + r.T("help.master_join"))
			continue
		}
		sb.WriteString("\n\n" + r.T(sectionHeaders[s]))
		for _, c := range cmds {
			sb.WriteString("\n" + r.T("help.line", locales.Data{"Command": c.Name, "Description": r.T(c.Desc)}))
		}
	}
	return sb.String()
}

// menu is the command menu of one scope: the commands that run in place
// and that the scope's users may use.
func (b *Bot) menu(lang string, admin bool, place Place) []delivery.Command {
	var out []delivery.Command
	for _, c := range b.commands {
		if c.where()&place == 0 || (c.Role == RoleAdmin && !admin) {
			continue
		}
		out = append(out, delivery.Command{Name: c.Name, Description: b.deps.Catalog.T(lang, c.Desc)})
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

// setMenu publishes one scope's menu in one language; an empty menu is
// deleted, since Telegram refuses an empty list.
func (b *Bot) setMenu(ctx context.Context, cmds []delivery.Command, scope delivery.CommandScope, lang string) error {
	if len(cmds) == 0 {
		return b.tg.DeleteCommands(ctx, scope, lang)
	}
	return b.tg.SetCommands(ctx, cmds, scope, lang)
}

// publishCommands sets Telegram's command menus in every language: the
// private commands in all private chats; nothing in groups, nor in the
// default scope that groups fall back to (earlier versions published the
// private commands there); the admin chat's commands in the admin chat;
// and the admin menu in each admin's private chat that already exists.
func (b *Bot) publishCommands(ctx context.Context) error {
	for i, lang := range locales.Languages {
		code := menuLanguage(i, lang)
		for _, scope := range []delivery.CommandScope{{Type: "default"}, {Type: "all_group_chats"}} {
			if err := b.tg.DeleteCommands(ctx, scope, code); err != nil {
				return fmt.Errorf("delete %s commands (%s): %w", scope.Type, lang, err)
			}
		}
		if err := b.setMenu(ctx, b.menu(lang, false, InPrivate), delivery.CommandScope{Type: "all_private_chats"}, code); err != nil {
			return fmt.Errorf("set private chat commands (%s): %w", lang, err)
		}
	}
	if b.cfg.AdminChatID != 0 {
		if err := b.publishAdminChatMenu(ctx); err != nil {
			// The bot may not be in the admin chat yet; the commands work
			// once it is, and the next start publishes the menu.
			b.deps.Log.Warn("admin chat menu not set", "chat", b.cfg.AdminChatID, "err", err)
		}
	}
	for id := range b.admins {
		if err := b.publishAdminMenu(ctx, id); err != nil {
			// An admin who never opened the bot has no chat yet; their first
			// update publishes it (see identify).
			b.deps.Log.Debug("admin menu deferred", "admin", id, "err", err)
		}
	}
	return nil
}

// publishAdminChatMenu sets the commands that run in the admin chat there.
func (b *Bot) publishAdminChatMenu(ctx context.Context) error {
	scope := delivery.CommandScope{Type: "chat", ChatID: b.cfg.AdminChatID}
	for i, lang := range locales.Languages {
		if err := b.setMenu(ctx, b.menu(lang, true, InAdminChat), scope, menuLanguage(i, lang)); err != nil {
			return fmt.Errorf("set admin chat commands (%s): %w", lang, err)
		}
	}
	return nil
}

// publishAdminMenu sets the admin command list in one admin's private chat.
func (b *Bot) publishAdminMenu(ctx context.Context, id int64) error {
	for i, lang := range locales.Languages {
		scope := delivery.CommandScope{Type: "chat", ChatID: id}
		if err := b.setMenu(ctx, b.menu(lang, true, InPrivate), scope, menuLanguage(i, lang)); err != nil {
			return fmt.Errorf("set admin commands for %d (%s): %w", id, lang, err)
		}
	}
	b.adminMenus.Store(id, true)
	return nil
}
