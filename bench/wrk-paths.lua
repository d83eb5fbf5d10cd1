-- wrk script: GET the paths listed in the file named by PATHS_FILE (one a line) in turn, each
-- thread starting at its own offset: a load of distinct pages, so a page cache cannot answer it.
local paths = {}
for line in io.lines(os.getenv("PATHS_FILE")) do if #line > 0 then paths[#paths + 1] = line end end
local counter = 0
local offset = 0
local thread_count = 0
function setup(thread) thread:set("offset", thread_count * 7919); thread_count = thread_count + 1 end
function request()
  counter = counter + 1
  return wrk.format("GET", paths[((offset + counter) % #paths) + 1])
end
