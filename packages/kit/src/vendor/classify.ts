/** 408 Request Timeout, 425 Too Early, 429 Too Many Requests and 5xx except 501 Not Implemented. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 425 || status === 429 || (status >= 500 && status <= 599 && status !== 501);
}

export function isGoneStatus(status: number): boolean {
  return status === 404 || status === 410;
}

/** `not_found`, `NotFound`, `NOT_FOUND`, `not-found`: the vendors' spellings of "no such resource". */
export function isNotFoundCode(code: string | undefined): boolean {
  return code !== undefined && /^not[-_ ]?found$/i.test(code);
}
