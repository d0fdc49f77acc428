"""SASL on a connection before it is authenticated: Kafka's server-side authenticator.

Theory of operation. A connection on a SASL_PLAINTEXT or SASL_SSL listener starts with a
``SaslSession`` in the HANDSHAKE state, and every frame it sends goes through
``SaslSession.receive`` until the login has succeeded:

- HANDSHAKE: ApiVersions is handed on to its handler; SaslHandshake (v0 or v1) picks a
  mechanism. An enabled one is answered with no error and starts the mechanism's server, then
  the state is AUTHENTICATE (v1: tokens come wrapped in SaslAuthenticate) or RAW (v0: the next
  frames are bare size-prefixed tokens, answered the same way). A mechanism that is not
  enabled is answered UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection is
  closed. Every other request closes the connection without an answer (Kafka: "Unexpected Kafka
  request of type ... during SASL handshake").
- AUTHENTICATE: SaslAuthenticate carries the client's token to the mechanism; its reply goes
  back in ``auth_bytes``. A failure is answered SASL_AUTHENTICATION_FAILED with the
  mechanism's message and closes the connection. Every other request is answered
  ILLEGAL_SASL_STATE where it is a SASL request, and the connection is closed.
- RAW (the unframed v0 flow): each frame is a token; a failure closes the connection (v0 has
  no way to say why).
- DONE: the principal (``User:alice``) is in ``ConnectionInfo.principal`` (a delegation
  token's owner after a SCRAM ``tokenauth`` login, with ``token_authenticated`` set); from here on the
  dispatcher handles every request normally, SASL requests included (they are then answered
  ILLEGAL_SASL_STATE by their handlers).

Re-authentication (KIP-368). With ``connections.max.reauth.ms`` > 0 the login's answer carries
that session lifetime (SaslAuthenticate v1+), and once it has passed, any request other than
SaslHandshake closes the connection (``wants`` routes it here). A SaslHandshake on a logged-in
connection starts a new login with the same mechanism; it must end with the same principal
(else SASL_AUTHENTICATION_FAILED, "Cannot change principals during re-authentication"), and
renews the session.

Passwords, proofs and tokens are never logged; a failed login logs the peer, the mechanism and
the reason the client is told.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from gregor.broker.common.events import log_event
from gregor.broker.config.listener_security import ListenerSecurity
from gregor.broker.state import ConnectionInfo
from gregor.protocol.errors import ErrorCode
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import decode_request_header, encode_response
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from gregor.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from gregor.security.oauthbearer import OAuthBearerServer
from gregor.security.plain import PlainServer
from gregor.security.sasl import OAUTHBEARER, PLAIN, SaslAuthenticationError, SaslServer
from gregor.security.scram import ScramCredential, ScramServer

log = logging.getLogger("gregor.broker")

HANDSHAKE, AUTHENTICATE, RAW, DONE, FAILED = "HANDSHAKE", "AUTHENTICATE", "RAW", "DONE", "FAILED"

#: (user, mechanism) -> the stored SCRAM credential, or None.
ScramLookup = Callable[[str, str], "ScramCredential | None"]
#: (token id, mechanism) -> (credential, owner principal, expiry ms) of a live delegation
#: token, or None.
TokenLookup = Callable[[str, str], "tuple[ScramCredential, str, int] | None"]


@dataclass(slots=True)
class Outcome:
    """What the connection does with a frame: send ``reply`` (if any), then close unless
    ``keep_open``; ``dispatch`` hands the request on to the normal handlers instead."""

    reply: bytes | None = None
    keep_open: bool = True
    dispatch: bool = False


class SaslSession:
    def __init__(
        self,
        security: ListenerSecurity,
        scram_lookup: ScramLookup,
        token_lookup: TokenLookup | None = None,
    ) -> None:
        self.security = security
        self.state = HANDSHAKE
        self.server: SaslServer | None = None
        self._scram_lookup = scram_lookup
        self._token_lookup = token_lookup
        self.expires_at: float | None = None  # time.monotonic() when the session ends
        self._reauth_from: tuple[str, str] | None = None  # (mechanism, principal) being renewed
        #: Called once the first login has succeeded (the connection lifts its frame limit).
        self.on_login: Callable[[], None] | None = None
        self._logged_in = False

    @property
    def authenticated(self) -> bool:
        return self.state == DONE

    def wants(self, frame: memoryview | bytes) -> bool:
        """Whether a logged-in connection's request is this session's business: a
        re-authentication, or any request once the session has expired."""
        if self.expires_at is None or len(frame) < 2:
            return False
        (api_key,) = struct.unpack_from(">h", frame, 0)
        return api_key == SaslHandshakeRequest.API_KEY or time.monotonic() >= self.expires_at

    def receive(self, frame: memoryview | bytes, info: ConnectionInfo) -> Outcome:
        limit = self.security.max_receive_size
        if not self._logged_in and len(frame) > limit:
            # The connection's frame decoder refuses such a size prefix already; this keeps
            # the rule for any other caller.
            log_event(
                log,
                "sasl.authentication_failed",
                logging.INFO,
                peer=info.peer,
                listener=info.listener,
                reason=f"invalid receive (size = {len(frame)} larger than {limit}) before authentication",
            )
            return self._fail()
        if self.state == DONE:  # reached through wants(): re-authentication or expiry
            (api_key,) = struct.unpack_from(">h", frame, 0)
            if api_key != SaslHandshakeRequest.API_KEY:
                log_event(
                    log,
                    "sasl.session_expired",
                    logging.INFO,
                    peer=info.peer,
                    principal=info.principal,
                )
                return self._fail()
            assert self.server is not None
            self._reauth_from = (self.server.mechanism, info.principal)
            self.state = HANDSHAKE
        if self.state == RAW:
            return self._raw_token(bytes(frame), info)
        try:
            header, body_offset = decode_request_header(frame)
        except ProtocolError as e:
            log_event(log, "request.malformed", logging.WARNING, peer=info.peer, reason=str(e))
            return self._fail()
        key, version, cid = header.api_key, header.api_version, header.correlation_id
        if self.state == HANDSHAKE and key == ApiVersionsRequest.API_KEY:
            return Outcome(dispatch=True)
        if self.state == HANDSHAKE and key == SaslHandshakeRequest.API_KEY:
            if not SaslHandshakeRequest.MIN_VERSION <= version <= SaslHandshakeRequest.MAX_VERSION:
                return self._unexpected(info, key, "handshake")
            try:
                req, _ = SaslHandshakeRequest.decode_from(memoryview(frame), body_offset, version)
            except ProtocolError:
                return self._fail()
            return self._handshake(req.mechanism, version, cid, info)
        if self.state == AUTHENTICATE and key == SaslAuthenticateRequest.API_KEY:
            if (
                not SaslAuthenticateRequest.MIN_VERSION
                <= version
                <= SaslAuthenticateRequest.MAX_VERSION
            ):
                return self._unexpected(info, key, "authentication")
            try:
                auth, _ = SaslAuthenticateRequest.decode_from(
                    memoryview(frame), body_offset, version
                )
            except ProtocolError:
                return self._fail()
            return self._authenticate(bytes(auth.auth_bytes), version, cid, info)
        if self.state == AUTHENTICATE and key == SaslHandshakeRequest.API_KEY and version <= 1:
            resp = SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
            return self._unexpected(
                info, key, "authentication", encode_response(key, version, cid, resp)
            )
        return self._unexpected(
            info, key, "handshake" if self.state == HANDSHAKE else "authentication"
        )

    # --- steps ---

    def _handshake(self, mechanism: str, version: int, cid: int, info: ConnectionInfo) -> Outcome:
        enabled = list(self.security.mechanisms)
        if self._reauth_from is not None and mechanism != self._reauth_from[0]:
            log_event(
                log,
                "sasl.illegal_state",
                logging.WARNING,
                peer=info.peer,
                reason=f"re-authentication with {mechanism} instead of {self._reauth_from[0]}",
            )
            resp = SaslHandshakeResponse(
                error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled
            )
            return self._fail(encode_response(SaslHandshakeRequest.API_KEY, version, cid, resp))
        if mechanism not in enabled:
            log_event(
                log,
                "sasl.unsupported_mechanism",
                logging.WARNING,
                peer=info.peer,
                listener=info.listener,
                mechanism=mechanism,
            )
            resp = SaslHandshakeResponse(
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
            )
            return self._fail(encode_response(SaslHandshakeRequest.API_KEY, version, cid, resp))
        self.server = self._new_server(mechanism)
        info.sasl_mechanism = mechanism
        self.state = AUTHENTICATE if version >= 1 else RAW
        resp = SaslHandshakeResponse(error_code=0, mechanisms=enabled)
        return Outcome(encode_response(SaslHandshakeRequest.API_KEY, version, cid, resp))

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(self.security.plain_users)
        if mechanism == OAUTHBEARER:
            assert self.security.oauthbearer is not None
            return OAuthBearerServer(self.security.oauthbearer)
        lookup, tokens = self._scram_lookup, self._token_lookup
        return ScramServer(
            mechanism,
            lambda user: lookup(user, mechanism),
            token_lookup=None if tokens is None else (lambda token_id: tokens(token_id, mechanism)),
        )

    def _evaluate(self, token: bytes, info: ConnectionInfo) -> bytes:
        """The mechanism's reply; on success the connection is authenticated."""
        assert self.server is not None
        reply = self.server.evaluate(token)
        if self.server.complete:
            principal = self.server.principal
            if self._reauth_from is not None and principal != self._reauth_from[1]:
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from {self._reauth_from[1]}: "
                    f"{principal}"
                )
            self.state = DONE
            info.principal = principal
            info.token_authenticated = bool(getattr(self.server, "token_authenticated", False))
            lifetime = self.session_lifetime_ms
            self.expires_at = time.monotonic() + lifetime / 1000 if lifetime > 0 else None
            log_event(
                log,
                "sasl.reauthenticated" if self._reauth_from else "sasl.authenticated",
                logging.DEBUG,
                peer=info.peer,
                mechanism=self.server.mechanism,
                principal=info.principal,
            )
            self._reauth_from = None
            if not self._logged_in:
                self._logged_in = True
                if self.on_login is not None:
                    self.on_login()
        return reply

    @property
    def session_lifetime_ms(self) -> int:
        """KIP-368: how long a login lasts on this listener with this mechanism (0: forever)."""
        if self.server is None:
            return 0
        lifetime = self.security.reauth_ms.get(self.server.mechanism, 0)
        expires_at_ms = self.server.expires_at_ms
        if lifetime > 0 and expires_at_ms is not None:
            # A token's session ends with the token (KIP-368), never later than the limit.
            lifetime = max(1, min(lifetime, expires_at_ms - int(time.time() * 1000)))
        return lifetime

    def _authenticate(self, token: bytes, version: int, cid: int, info: ConnectionInfo) -> Outcome:
        key = SaslAuthenticateRequest.API_KEY
        try:
            reply = self._evaluate(token, info)
        except SaslAuthenticationError as e:
            self._log_failure(info, str(e))
            resp = SaslAuthenticateResponse(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                error_message=str(e),
                auth_bytes=b"",
            )
            return self._fail(encode_response(key, version, cid, resp))
        lifetime = self.session_lifetime_ms if self.state == DONE else 0
        resp = SaslAuthenticateResponse(
            error_code=0, error_message=None, auth_bytes=reply, session_lifetime_ms=lifetime
        )
        return Outcome(encode_response(key, version, cid, resp))

    def _raw_token(self, token: bytes, info: ConnectionInfo) -> Outcome:
        try:
            reply = self._evaluate(token, info)
        except SaslAuthenticationError as e:
            self._log_failure(info, str(e))
            return self._fail()
        return Outcome(struct.pack(">i", len(reply)) + reply)

    # --- failures ---

    def _log_failure(self, info: ConnectionInfo, reason: str) -> None:
        mechanism = self.server.mechanism if self.server is not None else None
        log_event(
            log,
            "sasl.authentication_failed",
            logging.WARNING,
            peer=info.peer,
            listener=info.listener,
            mechanism=mechanism,
            reason=reason,
        )

    def _unexpected(
        self, info: ConnectionInfo, api_key: int, during: str, reply: bytes | None = None
    ) -> Outcome:
        log_event(
            log,
            "sasl.illegal_state",
            logging.WARNING,
            peer=info.peer,
            reason=f"Unexpected Kafka request of type {api_key} during SASL {during}",
        )
        return self._fail(reply)

    def _fail(self, reply: bytes | None = None) -> Outcome:
        self.state = FAILED
        return Outcome(reply, keep_open=False)
