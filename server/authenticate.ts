// How a request's caller is known: a personal access token, an OAuth access token of a live grant
// (for this request's audience), or a login's access token and its live session. HTTP knows none of these schemes: the app hands it this one function.
import { checkBearerToken, livePrincipal, notAuthenticated } from './auth/sessions.js';
import type { AppContext } from './context.js';
import type { Authenticate, Caller } from './http/principal.js';
import { personalAccessTokenCaller, scopeRefusal } from './tokens/authenticate.js';
import { looksLikePersonalAccessToken } from './tokens/format.js';
import { oauthAccessTokenCaller } from './oauth/access.js';
import { looksLikeOAuthAccessToken } from './oauth/secrets.js';
import type { AccessClaims, TokenRejection } from './security/tokens.js';

/** A caller: `principal` when the credential holds, else the 401 that says why not. */
function caller(
  principal: Caller['principal'],
  claims: AccessClaims | undefined,
  rejection: TokenRejection | undefined,
): Caller {
  return {
    principal,
    expiresAtMs: claims?.expiresAtMs,
    unauthenticated: () => notAuthenticated(claims, rejection),
    refusal: (route) => (principal ? scopeRefusal(principal, route) : notAuthenticated(claims, rejection)),
  };
}

export function authenticator(ctx: AppContext): Authenticate {
  return async (authorization, audience) => {
    const bearer = /^Bearer (.+)$/i.exec(authorization ?? '')?.[1];
    if (bearer !== undefined && looksLikeOAuthAccessToken(bearer)) {
      // With OAuth turned off, no app's token holds (the grants stay, for when it is on again).
      const checked = ctx.config.oauth.enabled
        ? await oauthAccessTokenCaller(ctx, bearer, audience)
        : { rejected: 'oauth_unknown' as const };
      return 'principal' in checked
        ? caller(checked.principal, undefined, undefined)
        : caller(undefined, undefined, checked.rejected);
    }
    if (bearer !== undefined && looksLikePersonalAccessToken(bearer)) {
      const checked = await personalAccessTokenCaller(ctx, bearer);
      return 'principal' in checked
        ? caller(checked.principal, undefined, undefined)
        : caller(undefined, undefined, checked.rejected);
    }
    const checked = await checkBearerToken(ctx, authorization);
    if (checked && 'claims' in checked)
      return caller(await livePrincipal(ctx, checked.claims), checked.claims, undefined);
    return caller(undefined, undefined, checked?.rejected);
  };
}
