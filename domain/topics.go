package domain

// The topics a chat's messages go into where it has topics: in a private
// chat (the bot's topic mode, Bot API 9.3), one per workflow the user
// uses; in a forum admin chat, one for each stream the admins read. A
// private admin chat (ADMIN_CHAT_ID naming an admin's own chat) folds the
// admin chat's three into its one Admin topic.
const (
	TopicVacancies = "vacancies"
	TopicMemory    = "memory"
	TopicOrders    = "orders"
	TopicAdmin     = "admin"

	TopicLog     = "log"     // the dispatch live log, a finished order's photo
	TopicRuns    = "runs"    // analysis runs: boards, proposals, events
	TopicNotices = "notices" // the system's notices: the LLM or HH refusing, a group added
)

// kindTopics is the topic of each kind of message that has one; a reply
// takes the topic of the command it answers (set by the bot).
var kindTopics = map[string]string{
	KindVacancy: TopicVacancies, KindDigest: TopicVacancies, KindCoverLetter: TopicVacancies,
	KindOffer: TopicOrders, KindOfferClose: TopicOrders, KindAssigned: TopicOrders, KindNote: TopicOrders,
	KindMemoryAnswer: TopicMemory, KindMemoryNote: TopicMemory, KindMemoryDraft: TopicMemory, KindMemoryExport: TopicMemory,
	KindLiveLog: TopicLog, KindPhoto: TopicLog,
	KindProposal: TopicRuns, KindProgress: TopicRuns, KindRunEvent: TopicRuns,
}

// adminChatTopics are the forum admin chat's topics.
var adminChatTopics = map[string]bool{TopicLog: true, TopicRuns: true, TopicNotices: true}

// TopicOf is the topic a message to chatID goes into where the chat has
// topics: the message's own (Message.Topic), else its kind's; "" for
// none (the chat itself). In a private chat the admin chat's topics are
// its Admin topic.
func TopicOf(chatID int64, kind, topic string) string {
	if topic == "" {
		topic = kindTopics[kind]
	}
	if chatID > 0 && adminChatTopics[topic] {
		return TopicAdmin
	}
	return topic
}
