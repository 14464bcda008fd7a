package tgfake

// Feature is a part of the Bot API that a server older than its version
// lacks: a local telegram-bot-api build lags the cloud's by months. A
// server set to lack one answers as such a server does (SetUnsupported).
type Feature string

const (
	// FeatureDrafts is sendMessageDraft (Bot API 9.5 for every bot): an
	// older server answers the unknown method 404 Not Found.
	FeatureDrafts Feature = "sendMessageDraft"
	// FeatureCopyText is the inline button's copy_text (Bot API 7.11): an
	// older server does not know the field, so the button has only its
	// text, which an inline keyboard refuses.
	FeatureCopyText Feature = "copy_text"
	// FeatureDateTime is the date_time entity, <tg-time> in HTML (Bot API
	// 9.5): an older server refuses the unknown tag.
	FeatureDateTime Feature = "date_time"
	// FeatureEphemeral is ephemeral messages (Bot API 10.2, their
	// ephemeral_message_parameters 10.3): an older server ignores the
	// parameter it does not know and posts the message for everyone.
	FeatureEphemeral Feature = "ephemeral"
	// FeatureButtonStyle is an inline button's style (Bot API 9.4): an
	// older server ignores the field and shows a plain button.
	FeatureButtonStyle Feature = "style"
	// FeatureDisabledButtons is an inline button's disabled (Bot API
	// 10.3): an older server does not know the field, so the button has
	// only its text, which an inline keyboard refuses.
	FeatureDisabledButtons Feature = "disabled"
	// FeatureDraftStop is a draft's stop button (sendMessageDraft's
	// can_stop and keep_on_stop, the stopped_message_generation update;
	// Bot API 10.3): an older server ignores the parameters, so no draft
	// has the button.
	FeatureDraftStop Feature = "can_stop"
	// FeatureTopics is topics in private chats (Bot API 9.3; creating them
	// there 9.4): an older server's getMe says nothing of them, and a
	// private chat has none.
	FeatureTopics Feature = "topics"
	// FeatureRichMessages is rich messages (Bot API 10.1): an older server
	// answers the unknown sendRichMessage 404 Not Found and ignores
	// editMessageText's rich_message, which it does not know.
	FeatureRichMessages Feature = "rich_message"
)

// Features lists every Feature, for playing a server that lacks them all.
var Features = []Feature{FeatureDrafts, FeatureCopyText, FeatureDateTime, FeatureEphemeral, FeatureButtonStyle, FeatureDisabledButtons, FeatureDraftStop, FeatureTopics, FeatureRichMessages}

// SetUnsupported makes the server answer as one that lacks the features
// (true) or knows them again (false).
func (s *Server) SetUnsupported(unsupported bool, fs ...Feature) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lacking == nil {
		s.lacking = map[Feature]bool{}
	}
	for _, f := range fs {
		s.lacking[f] = unsupported
	}
}

// knows reports whether the server knows f (plays no server without it).
func (s *Server) knows(f Feature) bool { return !s.lacks(f) }

// lacks reports whether the server plays one without f.
func (s *Server) lacks(f Feature) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lacking[f]
}
