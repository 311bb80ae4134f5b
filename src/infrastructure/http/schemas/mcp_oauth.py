from datetime import datetime

from infrastructure.http.schemas.common import ResponseModel


class AuthorizationOut(ResponseModel):
    """Where to send the admin to authorize the integration. Tokens are never returned."""

    authorize_url: str
    """The authorization server's page (PKCE, single-use state); open it in a browser"""
    redirect_uri: str
    """Where the authorization server sends the browser back (register it when you entered your own client)"""
    expires_at: datetime
    """The authorization must be completed before this"""
