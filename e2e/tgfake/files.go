package tgfake

import (
	"bytes"
	"fmt"
	"image"
	_ "image/gif" // register decoders: Telegram rejects photos it cannot decode
	_ "image/jpeg"
	_ "image/png"
	"mime"
	"path"
	"strings"
)

// Telegram's photo limits for bots.
const (
	maxPhotoBytes     = 10 << 20
	maxPhotoDimSum    = 10000
	maxPhotoAspect    = 20
	defaultDocumentMT = "application/octet-stream"
)

func sendPhoto(s *Server, r *request) (any, *APIError) { return s.sendMedia(r, "photo") }

func sendDocument(s *Server, r *request) (any, *APIError) { return s.sendMedia(r, "document") }

// sendMedia handles sendPhoto/sendDocument. The file is either a multipart
// part (named after the field, or referenced as attach://<part>) or a
// string: a file_id the fake issued earlier or an http(s) URL, which the
// fake accepts without downloading.
func (s *Server) sendMedia(r *request, kind string) (any, *APIError) {
	ref := r.str(kind)
	var up *upload
	switch {
	case strings.HasPrefix(ref, "attach://"):
		up = r.files[strings.TrimPrefix(ref, "attach://")]
		ref = ""
	case ref == "":
		up = r.files[kind]
	}
	if up == nil && ref == "" {
		return nil, badRequest("There is no %s in the request", kind)
	}
	body, apiErr := s.formatText(r.str("caption"), r.str("parse_mode"), r.str("caption_entities"), true)
	if apiErr != nil {
		return nil, apiErr
	}
	return s.deliver(r, outgoing{
		body:      body,
		isCaption: true,
		parseMode: r.str("parse_mode"),
		media: func() (*SentFile, *APIError) {
			if up != nil {
				return s.storeUploadLocked(kind, up)
			}
			return s.resolveFileRefLocked(kind, ref)
		},
		mediaKind: kind,
	})
}

func (s *Server) newFileIDLocked(kind string) (id, unique string) {
	s.nextFileID++
	return fmt.Sprintf("tgfake-%s-%d", kind, s.nextFileID), fmt.Sprintf("uniq%d", s.nextFileID)
}

func (s *Server) storeUploadLocked(kind string, up *upload) (*SentFile, *APIError) {
	if len(up.Data) == 0 {
		return nil, errDesc(400, DescFileEmpty)
	}
	if len(up.Data) > maxUploadBytes {
		return nil, errDesc(413, DescTooLarge)
	}
	f := &SentFile{Kind: kind, FileName: up.Name, Size: int64(len(up.Data)), Data: up.Data, Source: "upload"}
	if kind == "photo" {
		if len(up.Data) > maxPhotoBytes {
			return nil, badRequest("PHOTO_INVALID_DIMENSIONS")
		}
		cfg, _, err := image.DecodeConfig(bytes.NewReader(up.Data))
		switch {
		case err == nil:
			f.Width, f.Height = cfg.Width, cfg.Height
			if cfg.Width+cfg.Height > maxPhotoDimSum ||
				cfg.Width > maxPhotoAspect*cfg.Height || cfg.Height > maxPhotoAspect*cfg.Width {
				return nil, badRequest("PHOTO_INVALID_DIMENSIONS")
			}
		case isWebP(up.Data):
			// The standard library has no WebP decoder; Telegram accepts
			// WebP photos, so the fake does too, without dimensions.
		default:
			return nil, badRequest("IMAGE_PROCESS_FAILED")
		}
	} else {
		f.MimeType = mime.TypeByExtension(strings.ToLower(path.Ext(up.Name)))
		if f.MimeType == "" {
			f.MimeType = defaultDocumentMT
		}
		if i := strings.IndexByte(f.MimeType, ';'); i >= 0 {
			f.MimeType = f.MimeType[:i]
		}
	}
	f.FileID, f.FileUniqueID = s.newFileIDLocked(kind)
	return f, nil
}

func isWebP(b []byte) bool {
	return len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP"
}

func (s *Server) resolveFileRefLocked(kind, ref string) (*SentFile, *APIError) {
	if prev, ok := s.files[ref]; ok {
		if prev.Kind != kind {
			return nil, badRequest("Type of file mismatch")
		}
		cp := *prev
		cp.Source = "file_id"
		return &cp, nil
	}
	lower := strings.ToLower(ref)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		if _, err := normalizeURL(ref); err == nil {
			f := &SentFile{Kind: kind, Source: "url", URL: ref, FileName: path.Base(ref)}
			if kind == "document" {
				f.MimeType = defaultDocumentMT
				if mt := mime.TypeByExtension(strings.ToLower(path.Ext(ref))); mt != "" {
					f.MimeType, _, _ = strings.Cut(mt, ";")
				}
			} else {
				f.FileName = ""
			}
			f.FileID, f.FileUniqueID = s.newFileIDLocked(kind)
			return f, nil
		}
	}
	return nil, badRequest("Wrong file identifier/HTTP URL specified")
}
